#!/usr/bin/env bash
# errtext.sh: errors are told apart by type (errors.Is/As, the SDK's
# predicates), never by their text (run by `make lint`). The one exception
# is a third-party library that reports an error as text only: that line,
# or the comment just above it, says "third-party message:" and names the
# library and why no type tells the error apart.
#
# It sees the text matched where it is read (strings.Contains(err.Error(),
# ...), err.Error() == "...") and through a variable that holds it
# (msg := err.Error(), or lower := strings.ToLower(msg), then
# strings.Contains(msg, ...) or msg == "..." further on in the function;
# an empty msg == "" is no match):
# the marker then goes above the assignment, or above each match.
#
# With file arguments, it checks those files (its own test does);
# without, every Go file of the repository but tests and integration/.
set -euo pipefail
if [ $# -gt 0 ]; then
	files="$*"
else
	files=$(git ls-files -co --exclude-standard '*.go' | grep -v '_test\.go$' | grep -v '^integration/' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
fi
fns='Contains|HasPrefix|HasSuffix|TrimPrefix|TrimSuffix|Index|ReplaceAll|EqualFold|Cut|CutPrefix'
pattern='\.Error\(\) *[!=]=|strings\.('"$fns"')\([^()]*\.Error\(\)'
# shellcheck disable=SC2086 # files is a list of paths without spaces
bad=$(awk -v pat="$pattern" -v fns="$fns" '
	# word(v): v as a whole identifier, not a field (x.v) or a longer name.
	function word(v) { return "(^|[^A-Za-z0-9_.])" v "([^A-Za-z0-9_]|$)" }
	function report() { printf "%s:%d: %s\n", FILENAME, FNR, $0 }
	# taint[v]: v holds an error text; 1 when its assignment is marked.
	FNR == 1 { prev = ""; prev2 = ""; above = ""; split("", taint) }
	/^func / { split("", taint) }
	{
		# Marked: the line, the two above it, or the comment block above it.
		marked = ($0 prev prev2 above) ~ /third-party message:/
		line = $0
		if (line ~ pat && !marked) {
			report()
		}
		# An assignment (one name or several; mawk has no repeated groups).
		if (match(line, /^[ \t]*((if|switch|for|var)[ \t]+)?[A-Za-z_][A-Za-z0-9_, \t]*:?=[^=]/)) {
			lhs = substr(line, RSTART, RLENGTH - 1)
			rhs = substr(line, RSTART + RLENGTH - 1)
			sub(/^[ \t]*((if|switch|for|var)[ \t]+)?/, "", lhs)
			sub(/[ \t]*:?=$/, "", lhs)
			gsub(/[ \t]/, "", lhs)
			src = rhs ~ /\.Error\(\)/
			srcMarked = marked
			for (v in taint) {
				if (rhs ~ word(v)) {
					src = 1
					if (taint[v]) srcMarked = 1
				}
			}
			n = split(lhs, names, ",")
			for (i = 1; i <= n; i++) {
				if (names[i] == "_") continue
				if (src) {
					taint[names[i]] = srcMarked
				} else if (names[i] in taint) {
					delete taint[names[i]]
				}
			}
		}
		if (!marked) {
			for (v in taint) {
				if (taint[v]) continue
				if (line ~ ("strings\\.(" fns ")\\([ \t]*" v "[ \t]*[,)]") ||
					line ~ (word(v) "[ \t]*[!=]=[ \t]*\"[^\"]") || line ~ ("[^\"]\"[ \t]*[!=]=[ \t]*" v "([^A-Za-z0-9_]|$)")) {
					report()
					break
				}
			}
		}
		prev2 = prev
		prev = $0
		above = $0 ~ /^[ \t]*\/\// ? above $0 : ""
	}
' $files)
if [ -n "$bad" ]; then
	echo "errtext: errors matched by their text (match a type, or mark a third-party message):"
	echo "$bad"
	exit 1
fi
