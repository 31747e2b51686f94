// Package tftemplate renders template files the way Terraform's
// templatefile(path, vars) does, for the subset of the template language
// that Typhoon's and terraform-render-bootstrap's templates use. It lets the
// test world render the upstream templates vendored in
// integration/typhoon/upstream byte for byte as Terraform would.
//
// It follows Terraform's documented template syntax ("Strings and
// Templates" in the Terraform language documentation):
//
//   - ${expr} interpolates a string, number or bool (a bool as true or
//     false); a list, a map or null is an error, as in Terraform.
//   - $${ and %%{ are a literal ${ and %{.
//   - %{ if cond }…%{ else }…%{ endif } (cond a bool, or the string "true"
//     or "false") and %{ for v in coll }…%{ endfor } or
//     %{ for k, v in coll }…%{ endfor } (a list: k is the index; a map: k
//     is the key, keys in lexical order).
//   - A ~ just inside the opening ${ or %{ strips the whitespace that ends
//     the literal text before the sequence; a ~ just before the closing }
//     strips the whitespace that begins the literal text after it. As in
//     Terraform (HCL splits template literals into one token per line, the
//     newline ending its line's token), a strip reaches only to the nearest
//     line break: "%{~ for x in xs ~}" on a line of its own removes its own
//     line's indentation and the line break after it, not the indentation of
//     the following line, so the body's lines keep theirs.
//   - Expressions: variables, string literals with \n \r \t \" \\ \uNNNN
//     \UNNNNNNNN escapes (no template sequences inside them), integers,
//     true, false, null, list literals [a, b], indexing x[i], !, ==, !=,
//     &&, || and cond ? a : b, and the functions compact, split, join,
//     indent, format, formatlist, upper and lower.
//
// As in Terraform, every variable a template refers to must be in vars
// (checked before rendering, in branches not taken too), a function must be
// known, and each error names the template file, line and column
// (file:line:col). Errors unwrap to ErrSyntax, ErrUndeclared,
// ErrUnknownFunction, ErrType, ErrCall or ErrVars.
//
// Variables are a map[string]any of strings, bools, integers, and slices
// and string-keyed maps of those.
//
// Not supported (an error, never a silent difference): template sequences
// inside quoted strings, fractional numbers, arithmetic and comparison
// operators, attribute access (x.y), splat and for expressions, the ...
// argument expansion and functions other than those above. Terraform's
// special case of a template made of a single ${expr} returning a
// non-string value is not reproduced: the result is always a string.
//
// It is test infrastructure only.
package tftemplate
