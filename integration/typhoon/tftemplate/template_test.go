package tftemplate_test

import (
	"errors"
	"strings"
	"testing"

	"kedge.dev/kedge/integration/typhoon/tftemplate"
)

func TestConstructs(t *testing.T) {
	vars := map[string]any{
		"name":   "node1.example.com",
		"port":   6443,
		"yes":    true,
		"no":     false,
		"truthy": "true",
		"users":  []string{"alice", "bob"},
		"empty":  []string{},
		"labels": "a=b,c=d",
		"none":   "",
		"m":      map[string]string{"b": "2", "a": "1"},
		"names":  []string{"node1", "node2"},
		"fqdns":  []string{"node1.example.com", "node2.example.com"},
	}
	for _, tc := range []struct{ name, src, want string }{
		{"text only", "plain text\n", "plain text\n"},
		{"empty", "", ""},
		{"interpolation", "host=${name}\n", "host=node1.example.com\n"},
		{"spaces inside", "${ name }", "node1.example.com"},
		{"number", "port: ${port}", "port: 6443"},
		{"bool", "${yes}/${no}", "true/false"},
		{"dollar escape", "$${KUBELET_IMAGE} $${name}", "${KUBELET_IMAGE} ${name}"},
		{"percent escape", "%%{ if } %%{x}", "%{ if } %{x}"},
		{"lone dollar and percent", "awk '{print $2}' 100% $(POD_IP) $$", "awk '{print $2}' 100% $(POD_IP) $$"},
		{"dollar before escape", "$$${name}", "$${name}"},
		{"if true", "%{ if yes }on%{ endif }", "on"},
		{"if false", "%{ if no }on%{ endif }", ""},
		{"if else", "%{ if no }on%{ else }off%{ endif }", "off"},
		{"if string bool", "%{ if truthy }on%{ endif }", "on"},
		{"if not", "%{ if !no }on%{ endif }", "on"},
		{"if operators", `%{ if name == "node1.example.com" && !no || yes }eq%{ endif }%{ if name != "x" }ne%{ endif }`, "eqne"},
		{"conditional", `${yes ? "a" : "b"}${no ? "a" : "b"}`, "ab"},
		{"for list", "%{ for u in users }[${u}]%{ endfor }", "[alice][bob]"},
		{"for empty list", "a%{ for u in empty }[${u}]%{ endfor }b", "ab"},
		{"for index", "%{ for i, u in users }${i}=${u};%{ endfor }", "0=alice;1=bob;"},
		{"for map sorted", "%{ for k, v in m }${k}=${v};%{ endfor }", "a=1;b=2;"},
		{"for map values", "%{ for v in m }${v}%{ endfor }", "12"},
		{"nested", "%{ for u in users }%{ if u == \"bob\" }B%{ else }${u}%{ endif }%{ endfor }", "aliceB"},
		{"loop variable shadows", "%{ for name in users }${name}%{ endfor }${name}", "alicebobnode1.example.com"},
		{"list literal and index", `${["x", "y"][1]}${users[0]}${m["b"]}`, "yalice2"},
		{"string escapes", `${"a\tb\n\"q\" \\ \u00e9 \U0001F600 $${x}"}`, "a\tb\n\"q\" \\ é 😀 ${x}"},
		{"newlines inside a sequence", "${\n  join(\",\",\n    users)\n}", "alice,bob"},
		{"split compact join", `${join(" ", compact(split(",", labels)))}|${join(" ", compact(split(",", none)))}|`, "a=b c=d||"},
		{"formatlist join", `${join(",", formatlist("%s=https://%s:2380", names, fqdns))}`, "node1=https://node1.example.com:2380,node2=https://node2.example.com:2380"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tftemplate.Render("t.tmpl", []byte(tc.src), vars)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFunctions(t *testing.T) {
	vars := map[string]any{
		"labels": "a=b,,c=d,",
		"none":   "",
		"names":  []string{"node1", "node2"},
		"fqdns":  []string{"node1.example.com", "node2.example.com"},
		"mixed":  []any{"a", 1, true},
		"text":   "line1\nline2\n",
	}
	for _, tc := range []struct{ src, want string }{
		{`${join("|", split(",", labels))}`, "a=b||c=d|"},
		{`${join("|", compact(split(",", labels)))}`, "a=b|c=d"},
		{`%{ for l in compact(split(",", none)) }x%{ endfor }`, ""},
		{`${join("|", split(",", none))}.`, "."},
		{`${join(",", names, fqdns)}`, "node1,node2,node1.example.com,node2.example.com"},
		{`${join(",", mixed)}`, "a,1,true"},
		{`${join(",", formatlist("%s=https://%s:2380", names, fqdns))}`, "node1=https://node1.example.com:2380,node2=https://node2.example.com:2380"},
		{`${join(",", formatlist("https://%s:2379", fqdns))}`, "https://node1.example.com:2379,https://node2.example.com:2379"},
		{`${join(",", formatlist("%s-%d", "n", [1, 2]))}`, "n-1,n-2"},
		{`${join(",", formatlist("static"))}`, "static"},
		{`${format("%s:%d %v %t 100%%", "host", "6443", 1, true)}`, "host:6443 1 true 100%"},
		{`${indent(4, text)}`, "line1\n    line2\n    "},
		{`${upper("abc")}${lower("DeF")}`, "ABCdef"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			got, err := tftemplate.Render("f.tmpl", []byte(tc.src), vars)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := tftemplate.Indent(2, "a\nb\n"); got != "a\n  b\n  " {
		t.Errorf("Indent: %q", got)
	}
	if got := strings.Join(tftemplate.Functions(), ","); got != "compact,format,formatlist,indent,join,lower,split,upper" {
		t.Errorf("Functions: %s", got)
	}
}

// TestStripMarkers checks ~ as Terraform applies it: up to the nearest line
// break on its side, all whitespace there included.
func TestStripMarkers(t *testing.T) {
	vars := map[string]any{
		"x":      "X",
		"users":  []string{"alice", "bob"},
		"labels": "a=b,c=d",
		"taints": "",
		"yes":    true,
	}
	for _, tc := range []struct{ name, src, want string }{
		{"both sides, same line", "a \t ${~ x ~}  \t b", "aXb"},
		{"left only", "a  ${~x}  b", "aX  b"},
		{"right only", "a  ${x~}  b", "a  Xb"},
		{"directive", "a  %{~ if yes ~}  b  %{~ endif ~}  c", "abc"},
		{"left strip takes the previous line break", "a  \n${~x}", "aX"},
		{"left strip stops at the previous line break", "a  \n  ${~x}", "a  \nX"},
		{"right strip takes the next line break", "${x~}  \nb", "Xb"},
		{"right strip stops at the next line break", "${x~}\n  b", "X  b"},
		{"right strip takes one blank line only", "${x~}\n\n\nb", "X\n\nb"},
		{"text before the marker on its line stays", "a\n  b ${~x}", "a\n  bX"},
		{"strip between two sequences does nothing", "${x}${~x~}${x}", "XXX"},
		{"strip beside an escape", "$${  ${~x~}  %%{", "${X%{"},
		{"documented for loop", "Users:\n%{ for name in users ~}\n${name},\n%{~ endfor ~}\n", "Users:\nalice,bob,"},
		{"body keeps its indentation", "  --first \\\n  %{~ for l in compact(split(\",\", labels)) ~}\n  --node-labels=${l} \\\n  %{~ endfor ~}\n  %{~ for t in compact(split(\",\", taints)) ~}\n  --taint=${t} \\\n  %{~ endfor ~}\n  --last\n",
			"  --first \\\n  --node-labels=a=b \\\n  --node-labels=c=d \\\n  --last\n"},
		{"crlf", "a \r\n${~x~} \r\nb", "aXb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tftemplate.Render("s.tmpl", []byte(tc.src), vars)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	vars := map[string]any{
		"name":  "n",
		"list":  []string{"a"},
		"m":     map[string]string{"k": "v"},
		"null":  nil,
		"yes":   true,
		"count": 3,
	}
	for _, tc := range []struct {
		name, src string
		vars      map[string]any
		kind      error
		line, col int
		msg       string
	}{
		{"undeclared", "ok\n  ${nmae}", vars, tftemplate.ErrUndeclared, 2, 5, `"nmae"`},
		{"undeclared in a branch not taken", "%{ if false }\n${missing}\n%{ endif }", vars, tftemplate.ErrUndeclared, 2, 3, `"missing"`},
		{"undeclared loop variable outside its loop", "%{ for x in list }${x}%{ endfor }${x}", vars, tftemplate.ErrUndeclared, 1, 36, `"x"`},
		{"undeclared in a function argument", `${upper(nope)}`, vars, tftemplate.ErrUndeclared, 1, 9, `"nope"`},
		{"unknown function", "x\n${trimspace(name)}", vars, tftemplate.ErrUnknownFunction, 2, 3, `"trimspace"`},
		{"unknown function in a branch not taken", "%{ if false }${nope(1)}%{ endif }", vars, tftemplate.ErrUnknownFunction, 1, 16, `"nope"`},
		{"list interpolated", "a: ${list}", vars, tftemplate.ErrType, 1, 4, "string required, got a list"},
		{"map interpolated", "${m}", vars, tftemplate.ErrType, 1, 1, "got a map"},
		{"null interpolated", "x\n\n   ${null}", vars, tftemplate.ErrType, 3, 4, "null"},
		{"split result interpolated", `${split(",", name)}`, vars, tftemplate.ErrType, 1, 1, "list"},
		{"if not a bool", "%{ if name }x%{ endif }", vars, tftemplate.ErrType, 1, 1, "bool"},
		{"for over a string", "%{ for c in name }x%{ endfor }", vars, tftemplate.ErrType, 1, 1, "list or a map"},
		{"index out of range", "${list[1]}", vars, tftemplate.ErrType, 1, 7, "out of range"},
		{"function argument type", `${join(",", name)}`, vars, tftemplate.ErrCall, 1, 3, "list required"},
		{"function arity", `${split(",")}`, vars, tftemplate.ErrCall, 1, 3, "2 arguments"},
		{"formatlist lengths", `${join(",", formatlist("%s%s", list, ["a", "b"]))}`, vars, tftemplate.ErrCall, 1, 13, "inconsistent"},
		{"format verb", `${format("%x", 1)}`, vars, tftemplate.ErrCall, 1, 3, "not supported"},
		{"unclosed interpolation", "a\n${name", vars, tftemplate.ErrSyntax, 2, 1, "unclosed"},
		{"extra characters", "${name other}", vars, tftemplate.ErrSyntax, 1, 8, "extra characters"},
		{"unclosed if", "x %{ if yes }y", vars, tftemplate.ErrSyntax, 1, 3, "endif"},
		{"unclosed for", "%{ for x in list }y", vars, tftemplate.ErrSyntax, 1, 1, "endfor"},
		{"endif alone", "a\n%{ endif }", vars, tftemplate.ErrSyntax, 2, 1, "without a matching"},
		{"else in for", "%{ for x in list }%{ else }%{ endfor }", vars, tftemplate.ErrSyntax, 1, 19, "expected %{ endfor }"},
		{"endfor closing if", "%{ if yes }%{ endfor }", vars, tftemplate.ErrSyntax, 1, 12, "expected %{ endif }"},
		{"bad keyword", "%{ while yes }", vars, tftemplate.ErrSyntax, 1, 4, `"while"`},
		{"for without in", "%{ for x list }%{ endfor }", vars, tftemplate.ErrSyntax, 1, 10, "'in'"},
		{"template in a quoted string", `${"a${name}"}`, vars, tftemplate.ErrSyntax, 1, 5, "quoted"},
		{"bad escape", `${"\q"}`, vars, tftemplate.ErrSyntax, 1, 4, "escape"},
		{"unterminated string", "${\"abc}\n", vars, tftemplate.ErrSyntax, 1, 3, "unterminated"},
		{"fraction", "${1.5}", vars, tftemplate.ErrSyntax, 1, 3, "integer"},
		{"attribute", "${m.k}", vars, tftemplate.ErrSyntax, 1, 4, "attribute"},
		{"bad variable name", "x", map[string]any{"1st": "a"}, tftemplate.ErrVars, 1, 1, `"1st"`},
		{"bad variable type", "x", map[string]any{"f": struct{}{}}, tftemplate.ErrVars, 1, 1, `"f"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tftemplate.Render("dir/t.yaml", []byte(tc.src), tc.vars)
			if err == nil {
				t.Fatalf("no error; rendered %q", got)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %v is not %v", err, tc.kind)
			}
			var te *tftemplate.Error
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *tftemplate.Error", err)
			}
			if te.File != "dir/t.yaml" || te.Line != tc.line || te.Column != tc.col {
				t.Errorf("error at %s:%d:%d, want dir/t.yaml:%d:%d: %v", te.File, te.Line, te.Column, tc.line, tc.col, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "dir/t.yaml:") {
				t.Errorf("error %q does not start with the file", err)
			}
		})
	}
}

func TestParseOnceExecuteTwice(t *testing.T) {
	tmpl, err := tftemplate.Parse("p.tmpl", []byte("%{ for x in xs ~}\n${x}\n%{ endfor ~}"))
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Name() != "p.tmpl" {
		t.Errorf("Name: %s", tmpl.Name())
	}
	for _, tc := range []struct {
		xs   []string
		want string
	}{{[]string{"a", "b"}, "a\nb\n"}, {nil, ""}} {
		got, err := tmpl.Execute(map[string]any{"xs": tc.xs})
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("xs %v: got %q, want %q", tc.xs, got, tc.want)
		}
	}
	if _, err := tftemplate.Parse("bad.tmpl", []byte{0xff}); !errors.Is(err, tftemplate.ErrSyntax) {
		t.Errorf("invalid UTF-8: %v", err)
	}
}
