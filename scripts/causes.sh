#!/usr/bin/env bash
# causes.sh: an error wrapped keeps its cause (run by `make lint`). It
# finds, in product code (tests and the test world, integration/, aside),
# a line that builds a new error from another's text instead of wrapping
# it: a call of fmt.Errorf, on one line, that prints an error (err,
# fooErr, x.err, err.Error()) with %v or %s and has no %w, or errors.New
# of an error's text. Wrap with %w; where the cause must not be kept (a
# secret it could carry, a trust boundary, a refusal that must read as the
# innermost cause), that line, or the comment just above it, says "cause
# dropped:" and why.
set -euo pipefail
files=$(git ls-files -co --exclude-standard '*.go' | grep -v '_test\.go$' | grep -v '^integration/' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
bad=$(awk '
	# call is the text of the call that opens at s (its arguments, up to
	# its closing parenthesis, or the line end), strings skipped over.
	function call(s,    i, c, depth, q) {
		for (i = index(s, "("); i <= length(s); i++) {
			c = substr(s, i, 1)
			if (q != "") {
				if (c == "\\" && q == "\"") i++
				else if (c == q) q = ""
			} else if (c == "\"" || c == "`") q = c
			else if (c == "(") depth++
			else if (c == ")" && --depth == 0) return substr(s, 1, i)
		}
		return s
	}
	FNR == 1 { prev = ""; prev2 = "" }
	{
		# An error printed: err, a name ending in err or Err, a field
		# .err, or its .Error(); not errtype, errs or errCount.
		flat = 0
		if (/fmt\.Errorf\(/) {
			c = call(substr($0, index($0, "fmt.Errorf(")))
			flat = c ~ /%[vs]/ && c !~ /%w/ && c ~ /[,( ][A-Za-z0-9_.]*[eE]rr(\.Error\(\))?[,)]/
		}
		text = /errors\.New\([^()]*\.Error\(\)\)/
		if ((flat || text) && ($0 prev prev2) !~ /cause dropped:/)
			printf "%s:%d: %s\n", FILENAME, FNR, $0
		prev2 = prev; prev = $0
	}
' $files)
if [ -n "$bad" ]; then
	echo "causes: errors flattened to text (wrap with %w, or say \"cause dropped:\" and why):"
	echo "$bad"
	exit 1
fi
