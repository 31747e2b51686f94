package window

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // zone names resolve on any machine, with or without a zoneinfo database
)

// Spec is a maintenance window as operators write it in an inventory or
// a runbook's params.
type Spec struct {
	// Schedule is when openings start: a 5-field cron expression,
	// "minute hour day-of-month month day-of-week" ("0 2 * * SAT",
	// "30 1 * * MON-FRI"), or one of @hourly, @daily (@midnight),
	// @weekly, @monthly, @yearly (@annually).
	Schedule string `json:"schedule"`
	// Duration is how long each opening lasts: a Go duration of whole
	// seconds, more than 0 and at most 7 days ("4h", "90m").
	Duration string `json:"duration"`
	// TimeZone is the IANA zone the schedule's and the blackouts' wall
	// clock is read in; "" is UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// Blackouts are dates on which the window stays shut: "2026-12-24",
	// or an inclusive range "2026-12-20..2027-01-03", in TimeZone.
	Blackouts []string `json:"blackouts,omitempty"`
}

// Error is a Spec that Parse refused. Field is the field as the operator
// wrote it: schedule, duration, timeZone or blackouts[i] (i from 0).
type Error struct {
	Field   string
	Problem string
}

func (e *Error) Error() string { return e.Field + ": " + e.Problem }

// Window is a parsed Spec: when the window is open. It is immutable, so
// one Window may be used from several goroutines.
type Window struct {
	loc  *time.Location
	dur  int64 // seconds an opening lasts
	cron schedule
	// starts are the minutes of the day (0-1439) at which openings start
	// on a matching date, ascending.
	starts []int32
	// chain[i] is the last j >= i such that each of starts i+1..j comes
	// at most dur after the one before it: on a date without a clock
	// change, openings i to j make one stretch.
	chain []int32
	// blackouts are dates (days since 1970-01-01) as inclusive ranges,
	// ascending, neither overlapping nor touching.
	blackouts []dates
}

// dates is an inclusive range of dates, in days since 1970-01-01.
type dates struct{ from, to int64 }

const (
	secPerDay = 24 * 60 * 60
	// searchDays is how far past t At looks for the next opening: 9
	// years, so that a window on 29 February always finds its next one.
	searchDays = 9 * 366
	// followSecs is how far past t At follows an open window whose
	// openings overlap one another: 32 days, longer than any month.
	followSecs = 32 * secPerDay
)

// Parse checks a Spec and returns its Window. Each error it returns is an
// *Error naming the field; several are joined (errors.Join).
func Parse(s Spec) (*Window, error) {
	var errs []error
	fail := func(field, problem string) { errs = append(errs, &Error{Field: field, Problem: problem}) }
	w := &Window{}
	var err error
	if s.Schedule == "" {
		fail("schedule", `missing (e.g. "0 2 * * SAT")`)
	} else if w.cron, err = parseSchedule(s.Schedule); err != nil {
		fail("schedule", err.Error())
	}
	if w.dur, err = parseDuration(s.Duration); err != nil {
		fail("duration", err.Error())
	}
	if w.loc, err = loadZone(s.TimeZone); err != nil {
		fail("timeZone", err.Error())
	}
	for i, b := range s.Blackouts {
		d, err := parseBlackout(b)
		if err != nil {
			fail(fmt.Sprintf("blackouts[%d]", i), err.Error())
			continue
		}
		w.blackouts = append(w.blackouts, d)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	} else if len(errs) > 1 {
		return nil, errors.Join(errs...)
	}
	w.blackouts = mergeDates(w.blackouts)
	w.starts, w.chain = startsOfDay(w.cron, w.dur)
	return w, nil
}

// parseDuration parses Spec.Duration into seconds.
func parseDuration(text string) (int64, error) {
	if text == "" {
		return 0, errors.New(`missing (e.g. "4h")`)
	}
	d, err := time.ParseDuration(text)
	switch {
	case err != nil:
		return 0, fmt.Errorf(`%q: not a duration (e.g. "4h" or "90m")`, text)
	case d <= 0:
		return 0, fmt.Errorf("%q: must be more than 0", text)
	case d > 7*24*time.Hour:
		return 0, fmt.Errorf("%q: more than 7 days (168h)", text)
	case d%time.Second != 0:
		return 0, fmt.Errorf("%q: not a whole number of seconds", text)
	}
	return int64(d / time.Second), nil
}

// loadZone loads Spec.TimeZone. "Local" is refused: it is whatever the
// machine running the code is set to, and a workflow must not depend on
// that.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local": name the zone (e.g. "Europe/Berlin"); Local is whatever the machine is set to`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf(`%q: unknown time zone (want an IANA name such as "Europe/Berlin")`, name)
	}
	return loc, nil
}

// parseBlackout parses one entry of Spec.Blackouts.
func parseBlackout(text string) (dates, error) {
	first, last, isRange := strings.Cut(text, "..")
	from, ok := parseDate(first)
	to := from
	if isRange {
		var ok2 bool
		to, ok2 = parseDate(last)
		ok = ok && ok2
	}
	if !ok {
		return dates{}, fmt.Errorf("%q: want a date (2026-12-24) or an inclusive range (2026-12-20..2027-01-03)", text)
	}
	if to < from {
		return dates{}, fmt.Errorf("%q: ends before it starts", text)
	}
	return dates{from, to}, nil
}

// parseDate parses YYYY-MM-DD into days since 1970-01-01.
func parseDate(text string) (int64, bool) {
	t, err := time.Parse(time.DateOnly, text)
	if err != nil {
		return 0, false
	}
	return floorDiv(t.Unix(), secPerDay), true
}

// mergeDates sorts ranges and merges those that overlap or touch.
func mergeDates(ds []dates) []dates {
	slices.SortFunc(ds, func(a, b dates) int { return cmp.Compare(a.from, b.from) })
	var out []dates
	for _, d := range ds {
		if n := len(out); n > 0 && d.from <= out[n-1].to+1 {
			out[n-1].to = max(out[n-1].to, d.to)
			continue
		}
		out = append(out, d)
	}
	return out
}

// startsOfDay lists the minutes of the day at which openings start, and
// the stretches they make (see Window.chain).
func startsOfDay(c schedule, dur int64) (starts, chain []int32) {
	for h := range 24 {
		for m := range 60 {
			if c.hours&(1<<h) != 0 && c.minutes&(1<<m) != 0 {
				starts = append(starts, int32(h*60+m))
			}
		}
	}
	chain = make([]int32, len(starts))
	for i := len(starts) - 1; i >= 0; i-- {
		chain[i] = int32(i)
		if i+1 < len(starts) && int64(starts[i+1]-starts[i])*60 <= dur {
			chain[i] = chain[i+1]
		}
	}
	return starts, chain
}

// State is whether the window is open at a moment, and until when.
type State struct {
	Open bool
	// Until is, when Open, the moment the window closes; otherwise the
	// moment it next opens, or the zero Time when it opens in none of the
	// next 9 years. It is in the window's time zone.
	Until time.Time
}

// At says whether the window is open at t and until when. The window is
// open at t when an opening contains t: it started at a moment the
// schedule matches, at or before t, and lasts Duration, cut short where a
// blackout date begins; openings that overlap or touch make one stretch,
// and Until is where the stretch ends. A stretch is followed for 32 days:
// one that lasts longer reports an Until 32 days or more after t, at
// which it is still open. A t outside the years 1 to 9999 gets the zero
// State.
func (w *Window) At(t time.Time) State {
	if y := t.Year(); y < 1 || y > 9999 {
		return State{}
	}
	now := t.Unix()
	today := w.dateOf(now)
	// By the latest opening that started at or before t: each opening
	// ends no earlier than one before it, so if that one has ended by t,
	// all have. One that started before the date of t minus Duration has.
	// The search starts a date after t's, which the clock has shown
	// already if it went back over midnight.
	for num, first := today+1, w.dateOf(now-w.dur); num >= first; num-- {
		if !w.opensOn(num) {
			continue
		}
		d := w.day(num)
		i, s, ok := w.lastStart(&d, now)
		if !ok {
			continue
		}
		if w.end(num, s) <= now {
			break
		}
		return State{Open: true, Until: w.moment(w.follow(d, i, s, now))}
	}
	if _, _, s, ok := w.nextStart(now, today, today+searchDays); ok {
		return State{Until: w.moment(s)}
	}
	return State{}
}

// follow returns the end of the stretch of openings that the one at
// starts[i] on date d (at s) is part of.
func (w *Window) follow(d day, i int, s, now int64) int64 {
	for {
		s = w.lastOfChain(&d, i, s)
		end := w.end(d.num, s)
		if end-now > followSecs {
			return end
		}
		next, j, ns, ok := w.nextStart(s, d.num+1, w.dateOf(end))
		if !ok || ns > end {
			return end
		}
		d, i, s = next, j, ns
	}
}

// end is when the opening that starts at s on date num closes: Duration
// later, or where the first blackout date after num begins if that is
// earlier.
func (w *Window) end(num, s int64) int64 {
	end := s + w.dur
	i := sort.Search(len(w.blackouts), func(i int) bool { return w.blackouts[i].from > num })
	// A date more than 10 days on begins after any opening of num ends,
	// whatever the UTC offsets of the two dates.
	if i < len(w.blackouts) && w.blackouts[i].from <= num+10 {
		b := w.day(w.blackouts[i].from)
		end = min(end, b.begins())
	}
	return end
}

// opensOn says whether openings start on a date: the schedule matches it
// and it is not blacked out.
func (w *Window) opensOn(num int64) bool {
	if _, out := w.blackedOut(num); out {
		return false
	}
	_, m, dom := civil(num)
	return w.cron.matchesDay(int(m), dom, weekday(num))
}

// blackedOut returns the blackout range that holds a date, if any.
func (w *Window) blackedOut(num int64) (dates, bool) {
	i := sort.Search(len(w.blackouts), func(i int) bool { return w.blackouts[i].to >= num })
	if i < len(w.blackouts) && w.blackouts[i].from <= num {
		return w.blackouts[i], true
	}
	return dates{}, false
}

// nextStart finds the first opening that starts after the moment after,
// on a date from first to last: its date, its index in starts and when
// it starts. It skips months the schedule leaves out and blackout ranges
// whole.
func (w *Window) nextStart(after, first, last int64) (day, int, int64, bool) {
	for num := first; num <= last; num++ {
		y, m, dom := civil(num)
		if w.cron.months&(1<<int(m)) == 0 {
			num += int64(daysIn(y, m) - dom) // to the month's last day
			continue
		}
		if b, out := w.blackedOut(num); out {
			num = b.to
			continue
		}
		if !w.cron.matchesDay(int(m), dom, weekday(num)) {
			continue
		}
		d := w.day(num)
		if i, s, ok := w.firstStart(&d, after); ok {
			return d, i, s, true
		}
	}
	return day{}, 0, 0, false
}

// lastStart finds the last opening on date d that starts at or before now.
func (w *Window) lastStart(d *day, now int64) (int, int64, bool) {
	if base, ok := d.base(); ok {
		i := sort.Search(len(w.starts), func(i int) bool { return base+int64(w.starts[i])*60 > now }) - 1
		if i < 0 {
			return 0, 0, false
		}
		return i, base + int64(w.starts[i])*60, true
	}
	for i := len(w.starts) - 1; i >= 0; i-- {
		if s, ok := d.at(w.starts[i]); ok && s <= now {
			return i, s, true
		}
	}
	return 0, 0, false
}

// firstStart finds the first opening on date d that starts after the
// moment after.
func (w *Window) firstStart(d *day, after int64) (int, int64, bool) {
	if base, ok := d.base(); ok {
		i := sort.Search(len(w.starts), func(i int) bool { return base+int64(w.starts[i])*60 > after })
		if i == len(w.starts) {
			return 0, 0, false
		}
		return i, base + int64(w.starts[i])*60, true
	}
	for i := range w.starts {
		if s, ok := d.at(w.starts[i]); ok && s > after {
			return i, s, true
		}
	}
	return 0, 0, false
}

// lastOfChain follows the openings on date d from starts[i] (at s) for as
// long as each starts before the one before it ends, and returns when the
// last starts.
func (w *Window) lastOfChain(d *day, i int, s int64) int64 {
	if base, ok := d.base(); ok {
		return base + int64(w.starts[w.chain[i]])*60
	}
	for j := i + 1; j < len(w.starts); j++ {
		sj, ok := d.at(w.starts[j])
		if !ok {
			continue // in the gap of a spring-forward
		}
		if sj-s > w.dur {
			break
		}
		s = sj
	}
	return s
}

// dateOf is the date the wall clock in the window's zone reads at a
// moment (Unix seconds), in days since 1970-01-01.
func (w *Window) dateOf(sec int64) int64 {
	_, off := time.Unix(sec, 0).In(w.loc).Zone()
	return floorDiv(sec+int64(off), secPerDay)
}

// moment is a moment (Unix seconds) in the window's zone.
func (w *Window) moment(sec int64) time.Time { return time.Unix(sec, 0).In(w.loc) }

// day is one date on the wall clock of a zone: the stretches of constant
// UTC offset (zones) around it, from which the moment of each of its
// wall-clock times follows.
type day struct {
	num   int64 // days since 1970-01-01
	zones [4]zone
	n     int // zones used
}

// zone is a stretch of moments [from, to) (Unix seconds) over which a
// location keeps the UTC offset off (seconds east).
type zone struct{ from, to, off int64 }

// margin is more than any UTC offset: the moments whose wall clock reads
// a date lie within it of the date's own 24 hours.
const margin = 16 * 60 * 60

// day finds the zones of date num in the window's location.
func (w *Window) day(num int64) day {
	d := day{num: num}
	midnight := num * secPerDay
	for at := midnight - margin; at < midnight+secPerDay+margin && d.n < len(d.zones); {
		t := time.Unix(at, 0).In(w.loc)
		_, off := t.Zone()
		from, to := t.ZoneBounds()
		z := zone{from: math.MinInt64, to: math.MaxInt64, off: int64(off)}
		if !from.IsZero() {
			z.from = from.Unix()
		}
		if !to.IsZero() {
			z.to = to.Unix()
		}
		if d.n > 0 && d.zones[d.n-1].off == z.off {
			d.zones[d.n-1].to = z.to // only the zone's name changed
		} else {
			d.zones[d.n] = z
			d.n++
		}
		if z.to == math.MaxInt64 {
			break
		}
		at = z.to
	}
	return d
}

// base is, when the whole date has one UTC offset, the moment its wall
// clock reads 00:00.
func (d *day) base() (int64, bool) {
	midnight := d.num * secPerDay
	for _, z := range d.zones[:d.n] {
		from, to := midnight-z.off, midnight+secPerDay-z.off
		if z.from <= from && to <= z.to {
			return from, d.readsDateOnlyIn(z)
		}
	}
	return 0, false
}

// readsDateOnlyIn says whether no zone but z has a moment whose wall
// clock reads the date.
func (d *day) readsDateOnlyIn(only zone) bool {
	midnight := d.num * secPerDay
	for _, z := range d.zones[:d.n] {
		if z != only && max(z.from, midnight-z.off) < min(z.to, midnight+secPerDay-z.off) {
			return false
		}
	}
	return true
}

// at is the moment the wall clock reads minute m (0-1439) of the date: the
// first one when it reads that twice (the clock went back), none when it
// never does (the clock went forward over it).
func (d *day) at(m int32) (int64, bool) {
	wall := d.num*secPerDay + int64(m)*60
	best, found := int64(math.MaxInt64), false
	for _, z := range d.zones[:d.n] {
		if s := wall - z.off; z.from <= s && s < z.to && s < best {
			best, found = s, true
		}
	}
	return best, found
}

// begins is the first moment the wall clock reads the date or a later one.
func (d *day) begins() int64 {
	midnight := d.num * secPerDay
	first := int64(math.MaxInt64)
	for _, z := range d.zones[:d.n] {
		if s := max(z.from, midnight-z.off); s < z.to {
			first = min(first, s)
		}
	}
	return first
}

// civil is the year, month and day of the month of a date.
func civil(num int64) (int, time.Month, int) {
	return time.Unix(num*secPerDay, 0).UTC().Date()
}

// weekday is the day of the week of a date, Sunday 0.
func weekday(num int64) int {
	return int((num%7 + 7 + 4) % 7) // 1970-01-01 was a Thursday
}

// daysIn is the number of days in a month.
func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Describe says in words what the state means at now: "open until Sat
// 06:00 UTC", "waiting for the next window: Sat 02:00 UTC". A moment more
// than 6 days after now comes with its date ("Sat 2 Jan 02:00 UTC"), and
// its year too when that is not now's.
func (s State) Describe(now time.Time) string {
	if s.Until.IsZero() {
		return "closed: the window does not open in the next 9 years"
	}
	layout := "Mon 15:04 MST"
	if s.Until.Sub(now) > 6*24*time.Hour {
		layout = "Mon 2 Jan 15:04 MST"
		if now.In(s.Until.Location()).Year() != s.Until.Year() {
			layout = "Mon 2 Jan 2006 15:04 MST"
		}
	}
	if s.Open {
		return "open until " + s.Until.Format(layout)
	}
	return "waiting for the next window: " + s.Until.Format(layout)
}
