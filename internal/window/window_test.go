package window

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Duration: "4h"}, `schedule: missing (e.g. "0 2 * * SAT")`},
		{Spec{Schedule: "0 25 * * *", Duration: "4h"}, `schedule: field 2 (hour) "25": out of range 0-23`},
		{Spec{Schedule: "0 20-25 * * *", Duration: "4h"}, `schedule: field 2 (hour) "25": out of range 0-23`},
		{Spec{Schedule: "60 2 * * *", Duration: "4h"}, `schedule: field 1 (minute) "60": out of range 0-59`},
		{Spec{Schedule: "0 2 0 * *", Duration: "4h"}, `schedule: field 3 (day-of-month) "0": out of range 1-31`},
		{Spec{Schedule: "0 2 * 13 *", Duration: "4h"}, `schedule: field 4 (month) "13": out of range 1-12`},
		{Spec{Schedule: "0 2 * * 8", Duration: "4h"}, `schedule: field 5 (day-of-week) "8": out of range 0-7`},
		{Spec{Schedule: "0 2 * * MOM", Duration: "4h"}, `schedule: field 5 (day-of-week) "MOM": not a number or day name (SUN-SAT)`},
		{Spec{Schedule: "0 2 * JANUARY *", Duration: "4h"}, `schedule: field 4 (month) "JANUARY": not a number or month name (JAN-DEC)`},
		{Spec{Schedule: "0 MON * * *", Duration: "4h"}, `schedule: field 2 (hour) "MON": not a number`},
		{Spec{Schedule: "0 +2 * * *", Duration: "4h"}, `schedule: field 2 (hour) "+2": not a number`},
		{Spec{Schedule: "0 22-3 * * *", Duration: "4h"}, `schedule: field 2 (hour) "22-3": range starts after it ends`},
		{Spec{Schedule: "0 -3 * * *", Duration: "4h"}, `schedule: field 2 (hour) "-3": a range is start-end`},
		{Spec{Schedule: "0 1-2-3 * * *", Duration: "4h"}, `schedule: field 2 (hour) "1-2-3": a range is start-end`},
		{Spec{Schedule: "0 1,,2 * * *", Duration: "4h"}, `schedule: field 2 (hour) "1,,2": empty list item`},
		{Spec{Schedule: "0 1, * * *", Duration: "4h"}, `schedule: field 2 (hour) "1,": empty list item`},
		{Spec{Schedule: "*/0 2 * * *", Duration: "4h"}, `schedule: field 1 (minute) "*/0": step out of range 1-59`},
		{Spec{Schedule: "*/90 2 * * *", Duration: "4h"}, `schedule: field 1 (minute) "*/90": step out of range 1-59`},
		{Spec{Schedule: "*/x 2 * * *", Duration: "4h"}, `schedule: field 1 (minute) "*/x": step is not a number`},
		{Spec{Schedule: "*/5/2 2 * * *", Duration: "4h"}, `schedule: field 1 (minute) "*/5/2": step is not a number`},
		{Spec{Schedule: "5/10 2 * * *", Duration: "4h"}, `schedule: field 1 (minute) "5/10": a step needs a range: write 5-59/10 or */10`},
		{Spec{Schedule: "0 2 * *", Duration: "4h"}, `schedule: "0 2 * *": want 5 fields (minute hour day-of-month month day-of-week), got 4`},
		{Spec{Schedule: "0 0 2 * * SAT", Duration: "4h"}, `schedule: "0 0 2 * * SAT": want 5 fields (minute hour day-of-month month day-of-week), got 6 (there is no seconds field)`},
		{Spec{Schedule: "@reboot", Duration: "4h"}, `schedule: "@reboot": unknown macro (want @hourly, @daily, @weekly, @monthly, @yearly or 5 fields)`},
		{Spec{Schedule: "@every 1h", Duration: "4h"}, `schedule: "@every 1h": unknown macro (want @hourly, @daily, @weekly, @monthly, @yearly or 5 fields)`},
		{Spec{Schedule: "0 0 30 2 *", Duration: "4h"}, `schedule: "0 0 30 2 *": never matches: its months have none of its days of the month`},
		{Spec{Schedule: "0 0 31 4,6,9,11 *", Duration: "4h"}, `schedule: "0 0 31 4,6,9,11 *": never matches: its months have none of its days of the month`},
		{Spec{Schedule: "0 2 * * *"}, `duration: missing (e.g. "4h")`},
		{Spec{Schedule: "0 2 * * *", Duration: "4"}, `duration: "4": not a duration (e.g. "4h" or "90m")`},
		{Spec{Schedule: "0 2 * * *", Duration: "0s"}, `duration: "0s": must be more than 0`},
		{Spec{Schedule: "0 2 * * *", Duration: "-1h"}, `duration: "-1h": must be more than 0`},
		{Spec{Schedule: "0 2 * * *", Duration: "168h1s"}, `duration: "168h1s": more than 7 days (168h)`},
		{Spec{Schedule: "0 2 * * *", Duration: "1.5s"}, `duration: "1.5s": not a whole number of seconds`},
		{Spec{Schedule: "0 2 * * *", Duration: "4h", TimeZone: "Mars/Olympus"}, `timeZone: "Mars/Olympus": unknown time zone (want an IANA name such as "Europe/Berlin")`},
		{Spec{Schedule: "0 2 * * *", Duration: "4h", TimeZone: "Local"}, `timeZone: "Local": name the zone (e.g. "Europe/Berlin"); Local is whatever the machine is set to`},
		{Spec{Schedule: "0 2 * * *", Duration: "4h", Blackouts: []string{"2026-12-24", "2026-12-32", "2026-12-20..2027-01-03"}},
			`blackouts[1]: "2026-12-32": want a date (2026-12-24) or an inclusive range (2026-12-20..2027-01-03)`},
		{Spec{Schedule: "0 2 * * *", Duration: "4h", Blackouts: []string{"2027-01-03..2026-12-20"}}, `blackouts[0]: "2027-01-03..2026-12-20": ends before it starts`},
		{Spec{Schedule: "0 2 * * *", Duration: "4h", Blackouts: []string{"2026-12-20.."}},
			`blackouts[0]: "2026-12-20..": want a date (2026-12-24) or an inclusive range (2026-12-20..2027-01-03)`},
		{Spec{Schedule: "0 2 * * *", Duration: "4h", Blackouts: []string{"24.12.2026"}},
			`blackouts[0]: "24.12.2026": want a date (2026-12-24) or an inclusive range (2026-12-20..2027-01-03)`},
		{Spec{Schedule: "0 25 * * *", Duration: "forever", TimeZone: "Nowhere", Blackouts: []string{"x"}},
			`schedule: field 2 (hour) "25": out of range 0-23` + "\n" +
				`duration: "forever": not a duration (e.g. "4h" or "90m")` + "\n" +
				`timeZone: "Nowhere": unknown time zone (want an IANA name such as "Europe/Berlin")` + "\n" +
				`blackouts[0]: "x": want a date (2026-12-24) or an inclusive range (2026-12-20..2027-01-03)`},
	} {
		w, err := Parse(c.spec)
		if err == nil {
			t.Errorf("%+v: accepted, want %s", c.spec, c.want)
			continue
		}
		if w != nil {
			t.Errorf("%+v: a Window with the error", c.spec)
		}
		if err.Error() != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.spec, err, c.want)
		}
		var e *Error
		if !errors.As(err, &e) || !strings.HasPrefix(c.want, e.Field+": ") {
			t.Errorf("%+v: %v is no *Error naming the field", c.spec, err)
		}
	}
}

// TestParseSchedule checks what each accepted form of a field matches.
func TestParseSchedule(t *testing.T) {
	for _, c := range []struct {
		expr string
		want schedule
	}{
		{"0 2 * * SAT", schedule{minutes: 1, hours: 1 << 2, doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: 1 << 6, domAny: true}},
		{"30 1 * * MON-FRI", schedule{minutes: 1 << 30, hours: 1 << 1, doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: bits(1, 5, 1), domAny: true}},
		{"*/15 8-17/3 1,15 jan-Mar,dec fri-sun", schedule{minutes: bits(0, 59, 15), hours: bits(8, 17, 3), doms: 1<<1 | 1<<15,
			months: bits(1, 3, 1) | 1<<12, dows: 1<<0 | 1<<5 | 1<<6}},
		{"0 0 * * 7", schedule{minutes: 1, hours: 1, doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: 1, domAny: true}},
		{"0 0 * * 5-7", schedule{minutes: 1, hours: 1, doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: 1 | 1<<5 | 1<<6, domAny: true}},
		{"0 0 * * 0-7/2", schedule{minutes: 1, hours: 1, doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: 1 | 1<<2 | 1<<4 | 1<<6, domAny: true}},
		{"0 0 * * */7", schedule{minutes: 1, hours: 1, doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: 1, domAny: true}},
		{"0 0 29 2 *", schedule{minutes: 1, hours: 1, doms: 1 << 29, months: 1 << 2, dows: bits(0, 6, 1), dowAny: true}},
		{"@weekly", schedule{minutes: 1, hours: 1, doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: 1, domAny: true}},
		{"@DAILY", schedule{minutes: 1, hours: 1, doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: bits(0, 6, 1), domAny: true, dowAny: true}},
		{"@hourly", schedule{minutes: 1, hours: bits(0, 23, 1), doms: bits(1, 31, 1), months: bits(1, 12, 1), dows: bits(0, 6, 1), domAny: true, dowAny: true}},
		{"@yearly", schedule{minutes: 1, hours: 1, doms: 1 << 1, months: 1 << 1, dows: bits(0, 6, 1), dowAny: true}},
	} {
		got, err := parseSchedule(c.expr)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if got != c.want {
			t.Errorf("%q:\n got %+v\nwant %+v", c.expr, got, c.want)
		}
	}
}

// bits is a set of the values from lo to hi, step apart.
func bits(lo, hi, step int) uint64 {
	var b uint64
	for v := lo; v <= hi; v += step {
		b |= 1 << v
	}
	return b
}

// show is a State as the tests compare it: "open until …", "closed
// until …" or "closed for good", with the moment in the window's zone.
func show(s State) string {
	switch {
	case s.Until.IsZero() && !s.Open:
		return "closed for good"
	case s.Open:
		return "open until " + s.Until.Format("Mon 2006-01-02 15:04 MST")
	}
	return "closed until " + s.Until.Format("Mon 2006-01-02 15:04 MST")
}

func mustParse(t testing.TB, s Spec) *Window {
	t.Helper()
	w, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func moment(t testing.TB, text string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestAt(t *testing.T) {
	weekly := Spec{Schedule: "0 2 * * SAT", Duration: "4h"}
	for _, c := range []struct {
		name string
		spec Spec
		at   string // RFC 3339
		want string
	}{
		// Across the week's end: Sat 2026-01-03 02:00-06:00 UTC.
		{"before", weekly, "2026-01-02T12:00:00Z", "closed until Sat 2026-01-03 02:00 UTC"},
		{"a nanosecond before", weekly, "2026-01-03T01:59:59.999999999Z", "closed until Sat 2026-01-03 02:00 UTC"},
		{"opens", weekly, "2026-01-03T02:00:00Z", "open until Sat 2026-01-03 06:00 UTC"},
		{"inside", weekly, "2026-01-03T05:59:59.5Z", "open until Sat 2026-01-03 06:00 UTC"},
		{"closes", weekly, "2026-01-03T06:00:00Z", "closed until Sat 2026-01-10 02:00 UTC"},
		{"Sunday", weekly, "2026-01-04T01:00:00Z", "closed until Sat 2026-01-10 02:00 UTC"},
		{"past the year's end", weekly, "2026-12-31T23:00:00Z", "closed until Sat 2027-01-02 02:00 UTC"},
		{"weekdays from Friday night", Spec{Schedule: "30 1 * * MON-FRI", Duration: "2h", TimeZone: "Europe/Berlin"},
			"2026-01-03T01:00:00Z", "closed until Mon 2026-01-05 01:30 CET"},
		{"weekdays, Friday", Spec{Schedule: "30 1 * * MON-FRI", Duration: "2h", TimeZone: "Europe/Berlin"},
			"2026-01-02T01:00:00Z", "open until Fri 2026-01-02 03:30 CET"},
		{"Sunday written 7", Spec{Schedule: "0 3 * * 7", Duration: "1h"}, "2026-01-01T00:00:00Z", "closed until Sun 2026-01-04 03:00 UTC"},
		{"Friday to Sunday", Spec{Schedule: "0 3 * * FRI-SUN", Duration: "1h"}, "2026-01-04T04:00:00Z", "closed until Fri 2026-01-09 03:00 UTC"},
		{"opening over midnight", Spec{Schedule: "0 22 * * FRI", Duration: "6h"}, "2026-01-03T03:00:00Z", "open until Sat 2026-01-03 04:00 UTC"},

		// Month ends and the leap day.
		{"the 31st, from April", Spec{Schedule: "0 0 31 * *", Duration: "1h"}, "2026-04-01T00:00:00Z", "closed until Sun 2026-05-31 00:00 UTC"},
		{"the 31st, last hour", Spec{Schedule: "0 23 31 * *", Duration: "2h"}, "2026-06-01T00:30:00Z", "open until Mon 2026-06-01 01:00 UTC"},
		{"the 29th skips February", Spec{Schedule: "0 0 29 * *", Duration: "1h"}, "2026-01-30T00:00:00Z", "closed until Sun 2026-03-29 00:00 UTC"},
		{"leap day", Spec{Schedule: "0 12 29 2 *", Duration: "1h"}, "2026-03-01T00:00:00Z", "closed until Tue 2028-02-29 12:00 UTC"},
		{"leap day, eight years on", Spec{Schedule: "0 12 29 2 *", Duration: "1h"}, "2096-03-01T00:00:00Z", "closed until Fri 2104-02-29 12:00 UTC"},
		{"yearly", Spec{Schedule: "@yearly", Duration: "1h", TimeZone: "Asia/Tokyo"}, "2026-06-01T00:00:00Z", "closed until Fri 2027-01-01 00:00 JST"},

		// Day of the month or of the week.
		{"the 1st or a Monday: Monday", Spec{Schedule: "0 2 1 * MON", Duration: "1h"}, "2026-01-02T00:00:00Z", "closed until Mon 2026-01-05 02:00 UTC"},
		{"the 1st or a Monday: the 1st", Spec{Schedule: "0 2 1 * MON", Duration: "1h"}, "2026-05-26T00:00:00Z", "closed until Mon 2026-06-01 02:00 UTC"},
		{"the 1st or a Monday: the 1st, a Friday", Spec{Schedule: "0 2 1 * MON", Duration: "1h"}, "2026-04-28T00:00:00Z", "closed until Fri 2026-05-01 02:00 UTC"},
		{"the 13th, a Friday or not", Spec{Schedule: "0 2 13 * *", Duration: "1h"}, "2026-01-14T00:00:00Z", "closed until Fri 2026-02-13 02:00 UTC"},

		// Blackouts.
		{"blackout date", Spec{Schedule: "0 2 * * *", Duration: "4h", Blackouts: []string{"2026-12-24"}},
			"2026-12-23T07:00:00Z", "closed until Fri 2026-12-25 02:00 UTC"},
		{"blackout range", Spec{Schedule: "0 2 * * *", Duration: "4h", Blackouts: []string{"2026-12-20..2027-01-03"}},
			"2026-12-19T07:00:00Z", "closed until Mon 2027-01-04 02:00 UTC"},
		{"blackout ranges touching", Spec{Schedule: "0 2 * * *", Duration: "4h", Blackouts: []string{"2027-01-01..2027-01-03", "2026-12-20..2026-12-31"}},
			"2026-12-19T07:00:00Z", "closed until Mon 2027-01-04 02:00 UTC"},
		{"opening cut where a blackout begins", Spec{Schedule: "0 22 * * *", Duration: "4h", Blackouts: []string{"2026-12-24"}},
			"2026-12-23T23:00:00Z", "open until Thu 2026-12-24 00:00 UTC"},
		{"no opening during a blackout", Spec{Schedule: "0 22 * * *", Duration: "4h", Blackouts: []string{"2026-12-24"}},
			"2026-12-24T00:30:00Z", "closed until Fri 2026-12-25 22:00 UTC"},
		{"blackout begins in the zone", Spec{Schedule: "0 22 * * *", Duration: "4h", TimeZone: "Europe/Berlin", Blackouts: []string{"2026-12-24"}},
			"2026-12-23T22:00:00Z", "open until Thu 2026-12-24 00:00 CET"},
		{"a week-long opening cut days later", Spec{Schedule: "0 0 * * MON", Duration: "168h", Blackouts: []string{"2026-01-08"}},
			"2026-01-06T00:00:00Z", "open until Thu 2026-01-08 00:00 UTC"},
		{"everything blacked out", Spec{Schedule: "0 2 * * *", Duration: "4h", Blackouts: []string{"2026-01-01..2040-12-31"}},
			"2026-06-01T00:00:00Z", "closed for good"},

		// Stretches of openings that overlap or touch.
		{"overlapping", Spec{Schedule: "0 1,3 * * *", Duration: "3h"}, "2026-01-01T01:30:00Z", "open until Thu 2026-01-01 06:00 UTC"},
		{"overlapping, in the second", Spec{Schedule: "0 1,3 * * *", Duration: "3h"}, "2026-01-01T05:00:00Z", "open until Thu 2026-01-01 06:00 UTC"},
		{"touching", Spec{Schedule: "0 1,3 * * *", Duration: "2h"}, "2026-01-01T01:30:00Z", "open until Thu 2026-01-01 05:00 UTC"},
		{"apart", Spec{Schedule: "0 1,3 * * *", Duration: "1h"}, "2026-01-01T02:30:00Z", "closed until Thu 2026-01-01 03:00 UTC"},
		{"over the weekend", Spec{Schedule: "0 22 * * FRI,SAT", Duration: "26h"}, "2026-01-02T23:00:00Z", "open until Mon 2026-01-05 00:00 UTC"},
		{"every 5 minutes for 5", Spec{Schedule: "*/5 1-2 * * *", Duration: "5m"}, "2026-01-01T01:07:00Z", "open until Thu 2026-01-01 03:00 UTC"},
		{"a stretch ended by a blackout", Spec{Schedule: "0 0 * * *", Duration: "24h", Blackouts: []string{"2026-01-05"}},
			"2026-01-02T12:00:00Z", "open until Mon 2026-01-05 00:00 UTC"},
		{"after the blackout", Spec{Schedule: "0 0 * * *", Duration: "24h", Blackouts: []string{"2026-01-05"}},
			"2026-01-05T12:00:00Z", "closed until Tue 2026-01-06 00:00 UTC"},
		{"all December", Spec{Schedule: "0 0 * 12 *", Duration: "24h"}, "2026-12-01T00:00:00Z", "open until Fri 2027-01-01 00:00 UTC"},

		// Daylight saving time. Berlin: 2026-03-29 02:00 CET is 03:00
		// CEST; 2026-10-25 03:00 CEST is 02:00 CET.
		{"Berlin: skipped time skipped", Spec{Schedule: "30 2 * * *", Duration: "1h", TimeZone: "Europe/Berlin"},
			"2026-03-28T23:00:00Z", "closed until Mon 2026-03-30 02:30 CEST"},
		{"Berlin: the day after spring", Spec{Schedule: "30 2 * * *", Duration: "1h", TimeZone: "Europe/Berlin"},
			"2026-03-30T00:45:00Z", "open until Mon 2026-03-30 03:30 CEST"},
		{"Berlin: around the skipped hour", Spec{Schedule: "0 1 * * *", Duration: "2h", TimeZone: "Europe/Berlin"},
			"2026-03-29T01:30:00Z", "open until Sun 2026-03-29 04:00 CEST"},
		{"Berlin: repeated time, first", Spec{Schedule: "30 2 * * *", Duration: "1h", TimeZone: "Europe/Berlin"},
			"2026-10-25T00:30:00Z", "open until Sun 2026-10-25 02:30 CET"},
		{"Berlin: repeated time, once", Spec{Schedule: "30 2 * * *", Duration: "1h", TimeZone: "Europe/Berlin"},
			"2026-10-25T01:45:00Z", "closed until Mon 2026-10-26 02:30 CET"},
		{"Berlin: blackout begins at midnight CEST", Spec{Schedule: "0 22 * * *", Duration: "4h", TimeZone: "Europe/Berlin", Blackouts: []string{"2026-07-01"}},
			"2026-06-30T21:00:00Z", "open until Wed 2026-07-01 00:00 CEST"},
		// New York: 2026-03-08 02:00 EST is 03:00 EDT; 2026-11-01 02:00
		// EDT is 01:00 EST.
		{"New York: skipped", Spec{Schedule: "30 2 * * SUN", Duration: "1h", TimeZone: "America/New_York"},
			"2026-03-08T05:00:00Z", "closed until Sun 2026-03-15 02:30 EDT"},
		{"New York: repeated, first", Spec{Schedule: "30 1 * * *", Duration: "2h", TimeZone: "America/New_York"},
			"2026-11-01T06:45:00Z", "open until Sun 2026-11-01 02:30 EST"},
		{"New York: repeated, not again", Spec{Schedule: "30 1 * * *", Duration: "30m", TimeZone: "America/New_York"},
			"2026-11-01T06:15:00Z", "closed until Mon 2026-11-02 01:30 EST"},
		{"New York: every minute, the repeated hour shut", Spec{Schedule: "* * * * *", Duration: "1m", TimeZone: "America/New_York"},
			"2026-11-01T05:30:00Z", "open until Sun 2026-11-01 01:00 EST"},
		{"New York: in the repeated hour", Spec{Schedule: "* * * * *", Duration: "1m", TimeZone: "America/New_York"},
			"2026-11-01T06:30:00Z", "closed until Sun 2026-11-01 02:00 EST"},
		{"New York: every minute, 25 hours", Spec{Schedule: "* * * * *", Duration: "1m", TimeZone: "America/New_York"},
			"2026-10-31T12:00:00Z", "open until Sun 2026-11-01 01:00 EST"},
		{"New York: 23 hours from midnight, touching the next", Spec{Schedule: "0 0 * * *", Duration: "23h", TimeZone: "America/New_York"},
			"2026-03-08T12:00:00Z", "open until Mon 2026-03-09 23:00 EDT"},
		{"New York: midnight to midnight, 24 hours", Spec{Schedule: "0 0 8 3 *", Duration: "24h", TimeZone: "America/New_York"},
			"2026-03-08T12:00:00Z", "open until Mon 2026-03-09 01:00 EDT"},

		// The stretch followed for 32 days.
		{"always open", Spec{Schedule: "* * * * *", Duration: "1m"}, "2026-01-01T00:00:00Z", "open until Tue 2026-02-03 00:00 UTC"},
		{"always open, daily", Spec{Schedule: "0 0 * * *", Duration: "24h"}, "2026-01-01T00:00:00Z", "open until Tue 2026-02-03 00:00 UTC"},
	} {
		w := mustParse(t, c.spec)
		if got := show(w.At(moment(t, c.at))); got != c.want {
			t.Errorf("%s: At(%s):\n got %s\nwant %s", c.name, c.at, got, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		state State
		want  string
	}{
		{State{Open: true, Until: time.Date(2026, 1, 3, 6, 0, 0, 0, time.UTC)}, "open until Sat 06:00 UTC"},
		{State{Until: time.Date(2026, 1, 3, 2, 0, 0, 0, time.UTC)}, "waiting for the next window: Sat 02:00 UTC"},
		{State{Until: time.Date(2026, 1, 3, 2, 0, 0, 0, berlin)}, "waiting for the next window: Sat 02:00 CET"},
		{State{Until: time.Date(2026, 1, 7, 12, 0, 0, 0, time.UTC)}, "waiting for the next window: Wed 12:00 UTC"},
		{State{Until: time.Date(2026, 1, 7, 12, 0, 1, 0, time.UTC)}, "waiting for the next window: Wed 7 Jan 12:00 UTC"},
		{State{Open: true, Until: time.Date(2026, 7, 1, 0, 0, 0, 0, berlin)}, "open until Wed 1 Jul 00:00 CEST"},
		{State{Until: time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC)}, "waiting for the next window: Tue 29 Feb 2028 12:00 UTC"},
		{State{}, "closed: the window does not open in the next 9 years"},
	} {
		if got := c.state.Describe(now); got != c.want {
			t.Errorf("%s: got %q, want %q", show(c.state), got, c.want)
		}
	}
	// From the window itself, in its zone.
	w := mustParse(t, Spec{Schedule: "0 2 * * SAT", Duration: "4h", TimeZone: "America/New_York"})
	if got, want := w.At(now).Describe(now), "waiting for the next window: Sat 02:00 EST"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestAtAgainstMinutes compares At with a slow model that walks the
// clock minute by minute: the openings are read off the wall clock of
// each minute, each reading counted once (the first time it shows), cut
// at the first minute of a blackout date, and merged.
func TestAtAgainstMinutes(t *testing.T) {
	specs := []Spec{
		{Schedule: "0 2 * * SAT", Duration: "4h"},
		{Schedule: "*/20 1-3 * * *", Duration: "30m", TimeZone: "Europe/Berlin"},
		{Schedule: "30 1,2 * * *", Duration: "45m", TimeZone: "America/New_York"},
		{Schedule: "0 0 * * *", Duration: "26h", TimeZone: "America/New_York", Blackouts: []string{"2026-03-10", "2026-11-03..2026-11-05"}},
		{Schedule: "15 23 1,15 * TUE", Duration: "3h", TimeZone: "Australia/Lord_Howe"},
		{Schedule: "45 0 * * *", Duration: "90m", TimeZone: "Asia/Beirut", Blackouts: []string{"2026-10-26"}},
		{Schedule: "0 */6 * * *", Duration: "6h", TimeZone: "America/Santiago", Blackouts: []string{"2026-04-06", "2026-09-08"}},
		{Schedule: "*/7 * * * *", Duration: "7m", TimeZone: "Asia/Kathmandu", Blackouts: []string{"2026-03-31"}},
		{Schedule: "59 23 * * *", Duration: "1m", TimeZone: "Europe/London"},
		{Schedule: "0 12 * * MON-FRI", Duration: "100h", TimeZone: "Africa/Casablanca", Blackouts: []string{"2026-02-20..2026-02-21"}},
	}
	starts := []time.Time{
		time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 20, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range specs {
		w := mustParse(t, s)
		for _, from := range starts {
			const days = 30
			stretches := modelStretches(w, from.Add(-8*24*time.Hour), from.Add((days+40)*24*time.Hour))
			for range 300 {
				at := from.Add(time.Duration(rng.Int64N(days * 24 * int64(time.Hour))))
				if rng.IntN(4) == 0 {
					at = at.Truncate(time.Minute) // on a start or end
				}
				got, want := w.At(at), modelAt(stretches, at)
				if !agrees(got, want, at) {
					t.Errorf("%+v at %s: got %s, want %s", s, at.Format(time.RFC3339Nano), show(got), show(want))
				}
			}
		}
	}
}

// TestAtAgainstMinutesInAnOddZone compares At with the model in a zone
// made up to show what no zone of the database does yet: a clock that
// goes back over midnight, and two changes on one date.
func TestAtAgainstMinutesInAnOddZone(t *testing.T) {
	zone := oddZone(t)
	from := time.Date(2026, 2, 20, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range []Spec{
		{Schedule: "*/10 * * * *", Duration: "5m"},
		{Schedule: "15,45 0,23 * * *", Duration: "20m"},
		{Schedule: "10 0 1 3 *", Duration: "1h"},
		{Schedule: "0 0 * * *", Duration: "23h", Blackouts: []string{"2026-03-12"}},
		{Schedule: "30 23 * * *", Duration: "2h", Blackouts: []string{"2026-03-01"}},
		{Schedule: "30 1,21 * * *", Duration: "45m"},
	} {
		w := mustParse(t, s)
		w.loc = zone
		stretches := modelStretches(w, from.Add(-8*24*time.Hour), from.Add(70*24*time.Hour))
		for range 2000 {
			at := from.Add(time.Duration(rng.Int64N(25 * 24 * int64(time.Hour)))).Truncate(time.Minute)
			if got, want := w.At(at), modelAt(stretches, at); !agrees(got, want, at) {
				t.Errorf("%+v at %s: got %s, want %s", s, at.In(zone).Format(time.RFC3339), show(got), show(want))
			}
		}
	}
}

// oddZone is a made-up zone, ZZ0 (UTC) and ZZ1 (UTC+1). On 2026-03-01
// at 00:30 ZZ1 its clock goes back to 2026-02-28 23:30 ZZ0: the first
// half hour of 1 March shows before the last of 28 February shows again.
// On 2026-03-10 it goes forward at 01:00 and back at 22:00.
func oddZone(t testing.TB) *time.Location {
	t.Helper()
	utc := func(y int, m time.Month, d, h, min int) int32 {
		return int32(time.Date(y, m, d, h, min, 0, 0, time.UTC).Unix())
	}
	changes := []struct {
		at   int32
		zone byte
	}{
		{utc(2026, 1, 1, 0, 0), 1},
		{utc(2026, 2, 28, 23, 30), 0},
		{utc(2026, 3, 10, 1, 0), 1},
		{utc(2026, 3, 10, 21, 0), 0},
	}
	// TZif version 1: a header of counts, the changes, the zones, their
	// names.
	var b bytes.Buffer
	b.WriteString("TZif")
	b.Write(make([]byte, 16))
	for _, n := range []uint32{0, 0, 0, uint32(len(changes)), 2, 8} {
		_ = binary.Write(&b, binary.BigEndian, n)
	}
	for _, c := range changes {
		_ = binary.Write(&b, binary.BigEndian, c.at)
	}
	for _, c := range changes {
		b.WriteByte(c.zone)
	}
	_ = binary.Write(&b, binary.BigEndian, int32(0))
	b.Write([]byte{0, 0})
	_ = binary.Write(&b, binary.BigEndian, int32(3600))
	b.Write([]byte{1, 4})
	b.WriteString("ZZ0\x00ZZ1\x00")
	loc, err := time.LoadLocationFromTZData("Test/Odd", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// The made-up clock reads as intended.
	for at, want := range map[int64]string{
		int64(changes[1].at) - 1: "2026-03-01 00:29 ZZ1",
		int64(changes[1].at):     "2026-02-28 23:30 ZZ0",
		int64(changes[3].at) - 1: "2026-03-10 21:59 ZZ1",
	} {
		if got := time.Unix(at, 0).In(loc).Format("2006-01-02 15:04 MST"); got != want {
			t.Fatalf("the odd zone reads %s, want %s", got, want)
		}
	}
	return loc
}

// modelStretches lists the window's open stretches that start from from
// to to, walking the clock minute by minute.
func modelStretches(w *Window, from, to time.Time) [][2]time.Time {
	seen := map[string]bool{}
	var out [][2]time.Time
	for at := from.Truncate(time.Minute); at.Before(to); at = at.Add(time.Minute) {
		local := at.In(w.loc)
		reading := local.Format("2006-01-02 15:04")
		if seen[reading] {
			continue // the clock went back: this reading showed before
		}
		seen[reading] = true
		y, m, d := local.Date()
		num := floorDiv(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix(), secPerDay)
		if _, out := w.blackedOut(num); out || !w.cron.matchesDay(int(m), d, int(local.Weekday())) ||
			w.cron.hours&(1<<local.Hour()) == 0 || w.cron.minutes&(1<<local.Minute()) == 0 {
			continue
		}
		end := at.Add(time.Duration(w.dur) * time.Second)
		for m := at; m.Before(end); m = m.Add(time.Minute) {
			y, mo, d := m.In(w.loc).Date()
			if n := floorDiv(time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Unix(), secPerDay); n > num {
				if _, out := w.blackedOut(n); out {
					end = m // a blackout date begins
					break
				}
			}
		}
		if n := len(out); n > 0 && !at.After(out[n-1][1]) {
			out[n-1][1] = later(out[n-1][1], end)
			continue
		}
		out = append(out, [2]time.Time{at, end})
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// agrees says whether At's state at t is the model's, where the model
// sees as far as At does: At follows an open stretch for 32 days only,
// and the model sees no opening past its end (then the zero Until).
func agrees(got, want State, t time.Time) bool {
	follow := t.Add(followSecs * time.Second)
	switch {
	case got.Open != want.Open:
		return false
	case want.Until.IsZero():
		return got.Until.IsZero() || got.Until.After(t.Add(30*24*time.Hour))
	case want.Open && want.Until.After(follow):
		return got.Until.After(follow) && !got.Until.After(want.Until)
	}
	return got.Until.Equal(want.Until)
}

// modelAt is the state at t by the stretches.
func modelAt(stretches [][2]time.Time, t time.Time) State {
	for _, s := range stretches {
		if !t.Before(s[0]) && t.Before(s[1]) {
			return State{Open: true, Until: s[1]}
		}
		if t.Before(s[0]) {
			return State{Until: s[0]}
		}
	}
	return State{}
}

// TestAtIsPure: the same answer each time, from any goroutine.
func TestAtIsPure(t *testing.T) {
	w := mustParse(t, Spec{Schedule: "*/10 1-4 * * MON-FRI", Duration: "15m", TimeZone: "Europe/Berlin", Blackouts: []string{"2026-12-24"}})
	at := time.Date(2026, 3, 27, 3, 0, 0, 0, time.UTC)
	want := w.At(at)
	done := make(chan State)
	for range 8 {
		go func() { done <- w.At(at) }()
	}
	for range 8 {
		if got := <-done; got != want {
			t.Errorf("got %s, want %s", show(got), show(want))
		}
	}
}

// check tests At at one moment the way FuzzParse does: an open window
// is open until just before Until and (unless followed no further)
// closed at Until; a closed one is closed until just before Until and
// open at it.
func check(w *Window, at time.Time) error {
	s := w.At(at)
	if s.Until.IsZero() {
		if s.Open {
			return fmt.Errorf("at %s: open without an end", at)
		}
		return nil
	}
	if !s.Until.After(at) {
		return fmt.Errorf("at %s: %s is not after it", at, show(s))
	}
	before, then := w.At(s.Until.Add(-time.Nanosecond)), w.At(s.Until)
	switch {
	case before.Open != s.Open:
		return fmt.Errorf("at %s: %s, but just before Until %s", at, show(s), show(before))
	case !s.Open && !then.Open:
		return fmt.Errorf("at %s: %s, but then %s", at, show(s), show(then))
	case s.Open && then.Open && s.Until.Sub(at) <= followSecs*time.Second:
		return fmt.Errorf("at %s: %s, but then %s", at, show(s), show(then))
	}
	return nil
}

// fuzzZones are the time zones FuzzParse picks from (by a byte, so that
// the fuzzer spends its time on schedules and moments, not zone names).
var fuzzZones = []string{"", "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
	"Asia/Beirut", "America/Santiago", "Pacific/Apia", "Asia/Kathmandu", "Local", "Mars/Olympus"}

func FuzzParse(f *testing.F) {
	for _, s := range []struct {
		schedule, duration string
		zone               uint8
		blackouts          string
	}{
		{"0 2 * * SAT", "4h", 0, ""},
		{"30 1 * * MON-FRI", "2h", 2, "2026-12-24"},
		{"*/15 8-17/3 1,15 jan-Mar,dec fri-sun", "20m", 3, "2026-12-20..2027-01-03"},
		{"0 0 29 2 *", "24h", 4, ""},
		{"* * * * *", "1m", 3, "2026-11-02"},
		{"@weekly", "168h", 5, "2026-10-20..2026-10-30,2027-01-01"},
		{"0 0 * * *", "24h", 7, "2011-12-30"},
		{"0 0 30 2 *", "4h", 0, ""},
		{"0 25 * * *", "x", 9, "2026-13-01"},
	} {
		f.Add(s.schedule, s.duration, s.zone, s.blackouts, int64(1_790_000_000))
	}
	f.Fuzz(func(t *testing.T, schedule, duration string, zone uint8, blackouts string, sec int64) {
		spec := Spec{Schedule: schedule, Duration: duration, TimeZone: fuzzZones[int(zone)%len(fuzzZones)]}
		if blackouts != "" {
			spec.Blackouts = strings.Split(blackouts, ",")
		}
		w, err := Parse(spec)
		if err != nil {
			var e *Error
			if w != nil || !errors.As(err, &e) {
				t.Fatalf("%+v: %v with %v", spec, w, err)
			}
			return
		}
		// A moment from 1900 to 2200.
		const from, span = -2_208_988_800, 9_467_280_000
		at := time.Unix(from+(sec%span+span)%span, sec%1e9)
		if err := check(w, at); err != nil {
			t.Fatalf("%+v: %v", spec, err)
		}
	})
}

// TestCheck runs FuzzParse's check on many moments of a few windows, so
// that `go test` covers it beyond the seed corpus.
func TestCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range []Spec{
		{Schedule: "0 2 * * SAT", Duration: "4h", TimeZone: "Europe/Berlin", Blackouts: []string{"2026-12-24"}},
		{Schedule: "* 1-3 * * *", Duration: "1m", TimeZone: "America/New_York"},
		{Schedule: "0 0 * * *", Duration: "24h", TimeZone: "Pacific/Apia", Blackouts: []string{"2011-12-30..2011-12-31"}},
		{Schedule: "0 0 29 2 *", Duration: "168h", TimeZone: "America/Santiago"},
	} {
		w := mustParse(t, s)
		for range 500 {
			at := time.Unix(rng.Int64N(2_000_000_000), rng.Int64N(1e9))
			if err := check(w, at); err != nil {
				t.Errorf("%+v: %v", s, err)
			}
		}
	}
}

func BenchmarkAt(b *testing.B) {
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"weekly", Spec{Schedule: "0 2 * * SAT", Duration: "4h", TimeZone: "Europe/Berlin", Blackouts: []string{"2026-12-20..2027-01-03"}}},
		{"weekday quarter hours", Spec{Schedule: "*/15 8-17 * * MON-FRI", Duration: "10m", TimeZone: "America/New_York"}},
		{"leap day", Spec{Schedule: "0 12 29 2 *", Duration: "1h"}},
		{"always open", Spec{Schedule: "* * * * *", Duration: "1m", TimeZone: "Europe/Berlin"}},
	} {
		w := mustParse(b, c.spec)
		rng := rand.New(rand.NewPCG(5, 6))
		moments := make([]time.Time, 1024)
		for i := range moments {
			moments[i] = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(365 * 24 * int64(time.Hour))))
		}
		slices.SortFunc(moments, func(a, b time.Time) int { return a.Compare(b) })
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				w.At(moments[i%len(moments)])
			}
		})
	}
}
