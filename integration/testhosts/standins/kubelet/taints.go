package main

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// parseTaints reads --register-with-taints the way the real kubelet does:
// comma-separated key=value:Effect or key:Effect, each key and effect
// once, the key a qualified name and the value a label value.
func parseTaints(s string) ([]corev1.Taint, error) {
	var taints []corev1.Taint
	seen := map[string]bool{}
	for _, spec := range strings.Split(s, ",") {
		if strings.TrimSpace(spec) == "" {
			continue
		}
		t, err := parseTaint(spec)
		if err != nil {
			return nil, fmt.Errorf("--register-with-taints: %w", err)
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			return nil, fmt.Errorf("--register-with-taints: %s is given twice", id)
		}
		seen[id] = true
		taints = append(taints, t)
	}
	return taints, nil
}

func parseTaint(spec string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(spec, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("%q is not key[=value]:Effect", spec)
	}
	switch e := corev1.TaintEffect(effect); e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("%q: %q is not a taint effect (NoSchedule, PreferNoSchedule, NoExecute)", spec, effect)
	}
	key, value, _ := strings.Cut(kv, "=")
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return corev1.Taint{}, fmt.Errorf("%q: invalid key: %s", spec, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return corev1.Taint{}, fmt.Errorf("%q: invalid value: %s", spec, strings.Join(msgs, "; "))
	}
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}, nil
}
