#!/usr/bin/env bash
# errtext.sh: errors are told apart by type (errors.Is/As, the SDK's
# predicates), never by their text (run by `make lint`). The one exception
# is a third-party library that reports an error as text only: that line,
# or the comment just above it, says "third-party message:" and names the
# library.
set -euo pipefail
files=$(git ls-files -co --exclude-standard '*.go' | grep -v '_test\.go$' | grep -v '^integration/' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
pattern='\.Error\(\) *[!=]=|strings\.(Contains|HasPrefix|HasSuffix|TrimPrefix|TrimSuffix|Index|ReplaceAll|EqualFold|Cut|CutPrefix)\([^()]*\.Error\(\)'
bad=$(awk -v pat="$pattern" '
	FNR == 1 { prev = ""; prev2 = "" }
	$0 ~ pat && ($0 prev prev2) !~ /third-party message:/ { printf "%s:%d: %s\n", FILENAME, FNR, $0 }
	{ prev2 = prev; prev = $0 }
' $files)
if [ -n "$bad" ]; then
	echo "errtext: errors matched by their text (match a type, or mark a third-party message):"
	echo "$bad"
	exit 1
fi
