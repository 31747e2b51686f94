package window

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// schedule is a parsed cron expression: the values each field allows,
// one bit per value.
type schedule struct {
	minutes uint64 // bit n: minute n, 0-59
	hours   uint64 // bit n: hour n, 0-23
	doms    uint64 // bit n: day of the month n, 1-31
	months  uint64 // bit n: month n, 1-12
	dows    uint64 // bit n: day of the week n, 0 (Sunday) to 6
	// domAny and dowAny: the field was a lone "*". When either is, a day
	// must match both day fields; when neither is, either one will do.
	domAny, dowAny bool
}

// field describes one of the five fields of a cron expression.
type field struct {
	num      int    // 1 to 5, as in error messages
	name     string // as in error messages
	min, max int
	names    string // three-letter names of min, min+1, ... run together ("" for none)
	kind     string // what the names are, for error messages
}

// cronField is the i-th field (0-based) of a cron expression.
func cronField(i int) field {
	switch i {
	case 0:
		return field{num: 1, name: "minute", min: 0, max: 59}
	case 1:
		return field{num: 2, name: "hour", min: 0, max: 23}
	case 2:
		return field{num: 3, name: "day-of-month", min: 1, max: 31}
	case 3:
		return field{num: 4, name: "month", min: 1, max: 12,
			names: "JANFEBMARAPRMAYJUNJULAUGSEPOCTNOVDEC", kind: "month name (JAN-DEC)"}
	default:
		return field{num: 5, name: "day-of-week", min: 0, max: 7,
			names: "SUNMONTUEWEDTHUFRISAT", kind: "day name (SUN-SAT)"}
	}
}

// macros are the @-names a schedule may be instead of five fields.
func macro(name string) (string, bool) {
	switch strings.ToLower(name) {
	case "@yearly", "@annually":
		return "0 0 1 1 *", true
	case "@monthly":
		return "0 0 1 * *", true
	case "@weekly":
		return "0 0 * * 0", true
	case "@daily", "@midnight":
		return "0 0 * * *", true
	case "@hourly":
		return "0 * * * *", true
	}
	return "", false
}

// parseSchedule parses a 5-field cron expression or a macro. Its errors
// are the text after "schedule: ".
func parseSchedule(text string) (schedule, error) {
	var s schedule
	expr := text
	if strings.HasPrefix(text, "@") {
		var ok bool
		if expr, ok = macro(text); !ok {
			return s, fmt.Errorf("%q: unknown macro (want @hourly, @daily, @weekly, @monthly, @yearly or 5 fields)", text)
		}
	}
	parts := strings.Fields(expr)
	if len(parts) != 5 {
		msg := fmt.Sprintf("%q: want 5 fields (minute hour day-of-month month day-of-week), got %d", text, len(parts))
		if len(parts) == 6 {
			msg += " (there is no seconds field)"
		}
		return s, errors.New(msg)
	}
	sets := make([]uint64, 5)
	for i, p := range parts {
		bits, err := cronField(i).parse(p)
		if err != nil {
			return s, err
		}
		sets[i] = bits
	}
	if sets[4]&(1<<7) != 0 { // 7 is Sunday too
		sets[4] = sets[4]&^(1<<7) | 1
	}
	s = schedule{minutes: sets[0], hours: sets[1], doms: sets[2], months: sets[3], dows: sets[4],
		domAny: parts[2] == "*", dowAny: parts[4] == "*"}
	if s.never() {
		return s, fmt.Errorf("%q: never matches: its months have none of its days of the month", text)
	}
	return s, nil
}

// matchesDay says whether openings start on a date, given its month
// (1-12), day of the month (1-31) and day of the week (0-6, Sunday 0).
func (s *schedule) matchesDay(month, dom, dow int) bool {
	if s.months&(1<<month) == 0 {
		return false
	}
	domOK, dowOK := s.doms&(1<<dom) != 0, s.dows&(1<<dow) != 0
	if s.domAny || s.dowAny {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// never says whether no date matches: only possible when the days are
// picked by day of the month alone (day-of-week "*") and none of them
// exists in the months picked (30 February).
func (s *schedule) never() bool {
	if !s.dowAny {
		return false // a restricted day of the week comes every week
	}
	longest := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if s.months&(1<<m) != 0 && s.doms&(uint64(1)<<(longest[m]+1)-1) != 0 {
			return false
		}
	}
	return true
}

// parse parses one field: a comma-separated list of items, each a value,
// "*" or a range a-b, optionally followed by a step /n (after "*" or a
// range only).
func (f field) parse(text string) (uint64, error) {
	var bits uint64
	for _, item := range strings.Split(text, ",") {
		if item == "" {
			return 0, f.errorf(text, "empty list item")
		}
		b, err := f.item(item)
		if err != nil {
			return 0, err
		}
		bits |= b
	}
	return bits, nil
}

// item parses one item of a field's list.
func (f field) item(item string) (uint64, error) {
	base, stepText, stepped := strings.Cut(item, "/")
	step := 1
	if stepped {
		n, ok := number(stepText)
		switch {
		case !ok:
			return 0, f.errorf(item, "step is not a number")
		case n < 1 || n > f.max:
			return 0, f.errorf(item, fmt.Sprintf("step out of range 1-%d", f.max))
		}
		step = n
	}
	lo, hi := f.min, f.max
	switch from, to, isRange := strings.Cut(base, "-"); {
	case base == "*":
		if f.num == 5 {
			hi = 6 // every day of the week once
		}
	case isRange:
		if from == "" || to == "" || strings.Contains(to, "-") {
			return 0, f.errorf(item, "a range is start-end")
		}
		var err error
		if lo, err = f.value(from); err != nil {
			return 0, err
		}
		if hi, err = f.value(to); err != nil {
			return 0, err
		}
		if f.num == 5 && hi == 0 && lo > 0 {
			hi = 7 // FRI-SUN: Sunday ends the week
		}
		if lo > hi {
			return 0, f.errorf(item, "range starts after it ends")
		}
	case stepped:
		return 0, f.errorf(item, fmt.Sprintf("a step needs a range: write %s-%d/%s or */%s", base, f.max, stepText, stepText))
	default:
		v, err := f.value(base)
		if err != nil {
			return 0, err
		}
		lo, hi = v, v
	}
	var bits uint64
	for v := lo; v <= hi; v += step {
		bits |= 1 << v
	}
	return bits, nil
}

// value parses a number or, in the month and day-of-week fields, a
// three-letter name (any case).
func (f field) value(text string) (int, error) {
	if n, ok := number(text); ok {
		if n < f.min || n > f.max {
			return 0, f.errorf(text, fmt.Sprintf("out of range %d-%d", f.min, f.max))
		}
		return n, nil
	}
	for i := 0; i+3 <= len(f.names); i += 3 {
		if strings.EqualFold(text, f.names[i:i+3]) {
			return f.min + i/3, nil
		}
	}
	if f.names != "" {
		return 0, f.errorf(text, "not a number or "+f.kind)
	}
	return 0, f.errorf(text, "not a number")
}

// number parses a string of decimal digits (no sign); values too large
// for any field come back as 1000.
func number(text string) (int, bool) {
	if text == "" || strings.Trim(text, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(text)
	if err != nil || n > 1000 {
		return 1000, true
	}
	return n, true
}

// errorf is a problem with part of the field, quoted.
func (f field) errorf(part, problem string) error {
	return fmt.Errorf("field %d (%s) %q: %s", f.num, f.name, part, problem)
}
