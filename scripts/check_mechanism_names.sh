#!/usr/bin/env bash
# Fails, listing file:line, when a built-in mechanism's name is used outside
# its own module: what the framework needs from a mechanism is a property the
# mechanism declares (auth/mechanism_traits.h), never a name compared
# somewhere else (docs/DESIGN.md, "Mechanisms describe themselves").
# scripts/test.sh (and so CI) runs it.
#
#   scripts/check_mechanism_names.sh
#
# The built-ins are found where each module declares its name,
#   inline constexpr std::string_view k<X>Mechanism = "<name>";   (<module>.h)
# a header in auth/ (auth/mechanisms/<name>/) or components/, and a use is the
# quoted literal "<name>" or the constant k<X>Mechanism in a C++ source or
# header, outside comments. Allowed:
#  - in the module itself, <module>.{h,cc};
#  - in tests/ (tests name what they test), docs/ and *.md, and examples/
#    (applications choose their mechanisms by name);
#  - on a line carrying, or following a line carrying, a `// names: REASON`
#    marker: user-facing help and usage text, documented defaults, row labels;
#  - in the files of ALLOWED_FILES below, each with its reason;
#  - "token" where it names the token service or its JSON field
#    (TOKEN_SERVICE_RE), which share the word with the `token` mechanism.
set -euo pipefail
cd "$(dirname "$0")/.."

# File → why its mechanism names are labels, not decisions.
declare -A ALLOWED_FILES=(
  [minibench/plot.cc]="a colour per row label"
  [minibench/sessions.cc]="the TLS rows and the targets that compare two rows, by label"
  [minibench/report.cc]="report text and the summary table's rows, per row label"
  [minibench/throughput.cc]="the label of the throughput rows' method"
  [minibench/storm.cc]="a load generator writing a raw HELLO of the no-proof mechanism"
)
TOKEN_SERVICE_RE='call_json\("token"|\["token"\]|contains\("token"\)|\{"token", |command == "token"|kTokenServiceName = "token"'

modules=()   # "module|name|constant"
while IFS= read -r line; do
  file=${line%%:*}
  rest=${line#*:}
  constant=$(sed -E 's/.*std::string_view (k[A-Za-z0-9]+Mechanism) = .*/\1/' <<<"$rest")
  name=$(sed -E 's/.*= "([^"]+)";.*/\1/' <<<"$rest")
  modules+=("${file%.h}|$name|$constant")
done < <(git ls-files 'auth/*.h' 'components/*.h' |
           xargs grep -H -E '^inline constexpr std::string_view k[A-Za-z0-9]+Mechanism = "[^"]+";')
if [[ ${#modules[@]} -eq 0 ]]; then
  echo "check_mechanism_names: no built-in mechanism found in auth/ or components/" >&2
  exit 1
fi

failures=0
while IFS= read -r file; do
  case $file in tests/* | docs/* | examples/* | *.md) continue ;; esac
  [[ -n ${ALLOWED_FILES[$file]:-} ]] && continue
  for entry in "${modules[@]}"; do
    IFS='|' read -r module name constant <<<"$entry"
    [[ $file == "$module.h" || $file == "$module.cc" ]] && continue
    # Prints file:line:text for each use; awk keeps the previous line to
    # honour a marker above, and drops comments (a `//` after a space, so
    # that "tcp://host" in a string stays).
    awk -v name="\"$name\"" -v constant="$constant" -v file="$file" -v token_re="$TOKEN_SERVICE_RE" '
      {
        code = $0
        sub(/(^|[ \t])\/\/([ \t].*|$)/, "", code)
        marked = ($0 ~ /\/\/ names: / || previous ~ /\/\/ names: /)
        previous = $0
        if (marked) next
        hit = index(code, name) > 0
        if (!hit && match(code, "(^|[^A-Za-z0-9_])" constant "([^A-Za-z0-9_]|$)")) hit = 1
        if (hit && name == "\"token\"" && code ~ token_re) {
          stripped = code
          gsub(token_re, "", stripped)
          if (index(stripped, name) == 0) hit = 0
        }
        if (hit) printf "%s:%d: %s\n", file, NR, $0
      }' "$file"
  done
done < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h') | sort -u >"${TMPDIR:-/tmp}/check_mechanism_names.$$" || true

out="${TMPDIR:-/tmp}/check_mechanism_names.$$"
if [[ -s $out ]]; then
  echo "check_mechanism_names: a built-in mechanism's name outside its module (decide by its"
  echo "traits instead, auth/mechanism_traits.h; or mark help text with // names: REASON):"
  cat "$out"
  failures=1
fi
rm -f "$out"
exit "$failures"
