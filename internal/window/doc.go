// Package window computes maintenance windows: when a rollout's wave may
// start the next node. An operator writes a Spec (a cron schedule of
// openings, how long each lasts, a time zone, blackout dates); Parse
// checks it, and Window.At says, for a moment the caller passes, whether
// the window is open and until when, or when it next opens. The rollout
// starts a node only while the window is open, stops between nodes once
// it has closed, and waits for the next opening on a durable timer.
//
// # Schedule
//
// Five fields, "minute hour day-of-month month day-of-week", each a
// comma-separated list of values, "*", ranges a-b, and steps */n or
// a-b/n (a step after a lone value, 5/10, is refused: write 5-59/10).
// Months may be named JAN-DEC and days SUN-SAT, in any case; day-of-week
// 0 and 7 are both Sunday, and a range may end on Sunday written 0, 7 or
// SUN (FRI-SUN). A step is at most the field's largest value (*/90 in
// the minute field is refused rather than read as "at minute 0").
// There is no seconds field. The macros @hourly, @daily (@midnight),
// @weekly, @monthly and @yearly (@annually) stand for their usual five
// fields; other @-names (@reboot, @every) are refused.
//
// The day fields follow the standard cron rule: when both are restricted
// (neither is a lone "*"), a date matches if either does ("0 2 1 * MON":
// the 1st of each month and every Monday); otherwise it must match both.
// A schedule that can never match (30 February) is refused by Parse.
//
// # Openings, stretches, blackouts
//
// Each moment the schedule matches starts an opening [start,
// start+Duration); Duration is elapsed time, not wall-clock time.
// Openings that overlap or touch make one stretch, open until the latest
// of them ends.
//
// A blackout date (in TimeZone) shuts the window for the whole date: no
// opening starts on it, and an opening that started on an earlier date
// and would run into it ends where the blackout begins (the first moment
// the wall clock reads the blackout date). So the window is never open on
// a blackout date.
//
// # Daylight saving time
//
// Schedule and blackouts are read on the wall clock of TimeZone. A time
// that does not exist on a date (skipped when the clock springs forward)
// starts no opening that date. A time that exists twice (when the clock
// falls back) starts one opening, at the first. Openings that would touch
// in wall-clock time may therefore leave a gap, or overlap, around a
// clock change.
//
// # Limits
//
// At looks up to 9 years past t for the next opening (long enough for a
// schedule of 29 February); when blackouts shut everything in between,
// it reports the window closed with a zero Until. It follows an open
// stretch for 32 days: one that stays open longer (an always-open
// schedule such as "0 0 * * *" for 24h) reports an Until 32 days or more
// away, at which it is still open. At takes from under a microsecond to
// a few: it steps through dates, skipping months the schedule leaves out
// and blackout ranges whole, and finds the minutes within a date by
// binary search, never walking minute by minute.
//
// # What it must never do
//
// Workflow code calls At inside workflow.SideEffect (time.LoadLocation
// reads zone data, which may differ from one worker to another). So the
// package reads no clock (the caller passes t), does no I/O but loading
// the zone in Parse, starts no goroutines and keeps no mutable global
// state. It embeds the zone database (time/tzdata) so zone names resolve
// on any machine. "Local" is refused as a time zone. It imports nothing
// from Kedge.
package window
