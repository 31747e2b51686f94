package main

import (
	"bufio"
	"compress/gzip"
	"os"
	"strings"
)

// builtinOption names, for the modules Kubernetes hosts list in
// modules-load.d, the kernel option that builds each (the obj-$(CONFIG_…)
// line of its Kbuild Makefile). Without a modules directory for the
// running kernel, such a module is there when the kernel's configuration
// sets its option to y: built in, with no /sys/module entry when it has
// no parameters (br_netfilter).
var builtinOption = map[string]string{
	"br_netfilter":   "CONFIG_BRIDGE_NETFILTER",
	"bridge":         "CONFIG_BRIDGE",
	"overlay":        "CONFIG_OVERLAY_FS",
	"nf_conntrack":   "CONFIG_NF_CONNTRACK",
	"nf_nat":         "CONFIG_NF_NAT",
	"ip_tables":      "CONFIG_IP_NF_IPTABLES",
	"iptable_filter": "CONFIG_IP_NF_FILTER",
	"iptable_nat":    "CONFIG_IP_NF_NAT",
	"xt_conntrack":   "CONFIG_NETFILTER_XT_MATCH_CONNTRACK",
	"vxlan":          "CONFIG_VXLAN",
	"ip_vs":          "CONFIG_IP_VS",
	"ip_vs_rr":       "CONFIG_IP_VS_RR",
	"ip_vs_wrr":      "CONFIG_IP_VS_WRR",
	"ip_vs_sh":       "CONFIG_IP_VS_SH",
}

// readConfig reads the running kernel's configuration (/proc/config.gz,
// gzipped): CONFIG_X=VALUE lines. Missing or unreadable: empty.
func readConfig(file string) map[string]string {
	cfg := map[string]string{}
	f, err := os.Open(file)
	if err != nil {
		return cfg
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return cfg
	}
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = v
		}
	}
	return cfg
}
