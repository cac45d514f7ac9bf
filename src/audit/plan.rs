//! Which run to start next: sequential and targeted. A scenario asking "can it
//! break?" stops at its first counterexample (or after `--runs` runs); a twin
//! asking "does the fence hold?" waits for its recipe's unfenced scenario, runs
//! only if that broke, and then until it has its floor of provoked runs, a
//! flagged run, or its cap (a twin whose runs seldom provoke must not eat the
//! whole budget, and one whose first `--runs` runs provoked so seldom that even
//! the upper end of its rate's interval would not reach the floor within the cap
//! stops there: below its floor, the verdict says so). Pure: the tallies in, a
//! decision out.

use super::battery::Question;
use super::stats::wilson;

/// Runs of a fenced "does it hold?" scenario at most, per provoked run of its floor.
pub const CAP_PER_FLOOR: u32 = 3;

/// One scenario's runs so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub started: u32,
    pub in_flight: u32,
    /// Ended and checked, flagged.
    pub flagged: u32,
    /// Ended, checked and provoked (flagged or not).
    pub provoked: u32,
}

/// What a scenario wants now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Another run.
    Start,
    /// Nothing until a run in flight (its own or its unfenced scenario's) ends.
    Wait,
    /// Its question is answered, or it is not asked.
    Done(Why),
}

/// Why a scenario needs no more runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A flagged run: the counterexample.
    Broke,
    /// A "can it break?" scenario ran its `--runs` with no break.
    RanOut,
    /// A twin reached its floor of provoked runs.
    Floor,
    /// A twin ran its cap without reaching its floor.
    Cap,
    /// A twin whose recipe never broke unfenced: nothing for its fence to hold against.
    NotAsked,
}

/// The questions of a battery and their limits.
#[derive(Debug, Clone)]
pub struct Plan {
    pub questions: Vec<Question>,
    /// Runs of each scenario at most.
    pub caps: Vec<u32>,
    /// Provoked runs a "does it hold?" scenario needs.
    pub floor: u32,
    /// A twin none of whose first this many runs provoked stops: its runs do not
    /// reach the danger, and more of them would not either.
    pub unprovoked_after: u32,
}

impl Plan {
    /// `runs` for each "can it break?" scenario and each twin whose holder fences
    /// itself (no verdict rests on it, and a self-fencing holder that works
    /// withholds its late writes: its runs seldom provoke); `floor` ×
    /// [`CAP_PER_FLOOR`] for a fenced twin, on which the verdict rests.
    pub fn new(questions: Vec<Question>, fenced: &[bool], runs: u32, floor: u32) -> Plan {
        let caps = questions
            .iter()
            .zip(fenced)
            .map(|(q, &fenced)| match q {
                Question::DoesItHold { .. } if fenced => floor.saturating_mul(CAP_PER_FLOOR),
                _ => runs,
            })
            .collect();
        Plan {
            questions,
            caps,
            floor,
            unprovoked_after: runs,
        }
    }

    /// Runs of scenario `i` at most.
    pub fn cap(&self, i: usize) -> u32 {
        self.caps[i]
    }

    pub fn want(&self, i: usize, tallies: &[Tally]) -> Want {
        let t = tallies[i];
        let ran_out = |why| match t.in_flight {
            0 => Want::Done(why),
            _ => Want::Wait,
        };
        match self.questions[i] {
            _ if t.flagged > 0 => Want::Done(Why::Broke),
            Question::CanItBreak if t.started >= self.cap(i) => ran_out(Why::RanOut),
            Question::CanItBreak => Want::Start,
            Question::DoesItHold { unfenced } => {
                if tallies[unfenced].flagged == 0 {
                    return match self.want(unfenced, tallies) {
                        Want::Done(_) => Want::Done(Why::NotAsked),
                        _ => Want::Wait,
                    };
                }
                let ended = t.started - t.in_flight;
                if t.provoked >= self.floor {
                    Want::Done(Why::Floor)
                } else if ended >= self.unprovoked_after && !self.may_reach_floor(i, t) {
                    Want::Done(Why::Cap)
                } else if t.started >= self.cap(i) {
                    ran_out(Why::Cap)
                } else if t.provoked + t.in_flight >= self.floor {
                    // Enough in flight to reach the floor if each provokes: wait.
                    Want::Wait
                } else {
                    Want::Start
                }
            }
        }
    }

    /// Whether a twin could still reach its floor within its cap if its runs
    /// provoked as often as the upper end of the Wilson interval of its rate so
    /// far: one that provoked 2 of its first 20 (≤ 30%) gets at most 12 more in
    /// 40 runs, short of 20, and its runs go to the twins that can. 0 provoked of
    /// `--runs` is the plainest case.
    fn may_reach_floor(&self, i: usize, t: Tally) -> bool {
        let ended = t.started - t.in_flight;
        let Some(rate) = wilson(t.provoked as usize, ended as usize) else {
            return true;
        };
        let left = self.cap(i).saturating_sub(ended) as f64;
        t.provoked as f64 + left * rate.high >= self.floor as f64
    }

    /// The scenario to start a run of next, of those wanting one and not `barred`:
    /// the one with the fewest runs started (earlier in the battery on a tie), so
    /// that runs spread over the scenarios as a budget cut leaves them.
    pub fn next(&self, tallies: &[Tally], barred: &[bool]) -> Option<usize> {
        (0..tallies.len())
            .filter(|&i| !barred[i] && self.want(i, tallies) == Want::Start)
            .min_by_key(|&i| tallies[i].started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// holder-pause unfenced (0) and fenced (1); slow-links unfenced (2) and fenced (3).
    fn plan() -> Plan {
        Plan::new(
            vec![
                Question::CanItBreak,
                Question::DoesItHold { unfenced: 0 },
                Question::CanItBreak,
                Question::DoesItHold { unfenced: 2 },
            ],
            &[false, true, false, true],
            10,
            20,
        )
    }

    #[test]
    fn twins_wait_for_their_recipe_to_break() {
        let p = plan();
        let mut t = vec![Tally::default(); 4];
        assert_eq!(p.want(1, &t), Want::Wait);
        assert_eq!(p.next(&t, &[false; 4]), Some(0));
        t[0] = Tally {
            started: 1,
            in_flight: 1,
            ..Tally::default()
        };
        assert_eq!(p.next(&t, &[false; 4]), Some(2));
        // The break: the unfenced scenario is done, its twin starts.
        t[0] = Tally {
            started: 1,
            flagged: 1,
            provoked: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(0, &t), Want::Done(Why::Broke));
        assert_eq!(p.want(1, &t), Want::Start);
        // slow-links ran its 10 runs without a break: its twin is never asked.
        t[2].started = 10;
        assert_eq!(p.want(2, &t), Want::Done(Why::RanOut));
        assert_eq!(p.want(3, &t), Want::Done(Why::NotAsked));
        t[2].in_flight = 1;
        assert_eq!(p.want(2, &t), Want::Wait);
        assert_eq!(p.want(3, &t), Want::Wait);
    }

    #[test]
    fn a_twin_runs_to_its_floor_of_provoked_runs_or_its_cap() {
        let p = plan();
        let mut t = vec![Tally::default(); 4];
        t[0].flagged = 1;
        t[1] = Tally {
            started: 25,
            provoked: 19,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Start);
        t[1].in_flight = 1;
        assert_eq!(p.want(1, &t), Want::Wait);
        t[1] = Tally {
            started: 26,
            provoked: 20,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Done(Why::Floor));
        t[1] = Tally {
            started: 60,
            provoked: 5,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Done(Why::Cap));
        // None of its first 10 ended runs provoked: more would not either.
        t[1] = Tally {
            started: 11,
            in_flight: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Done(Why::Cap));
        t[1].started = 10;
        assert_eq!(p.want(1, &t), Want::Start);
        // 2 provoked of 13 (<= 42%): 47 more runs may still bring 18 more.
        t[1] = Tally {
            started: 13,
            provoked: 2,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Start);
        // 2 of 20 (<= 30%): 40 more would bring 12 at that rate, short of 20.
        t[1].started = 20;
        assert_eq!(p.want(1, &t), Want::Done(Why::Cap));
        t[1] = Tally {
            started: 3,
            provoked: 1,
            flagged: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Done(Why::Broke));
        // A self-fencing twin stops at --runs.
        let p = Plan::new(p.questions, &[false, false, false, false], 10, 20);
        t[1] = Tally {
            started: 10,
            provoked: 0,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Done(Why::Cap));
    }

    #[test]
    fn runs_spread_over_the_scenarios_that_want_one() {
        let p = plan();
        let mut t = vec![Tally::default(); 4];
        t[0].started = 3;
        t[2].started = 2;
        assert_eq!(p.next(&t, &[false; 4]), Some(2));
        assert_eq!(p.next(&t, &[false, false, true, false]), Some(0));
        t[0].started = 10;
        t[2].started = 10;
        assert_eq!(p.next(&t, &[false; 4]), None);
    }
}
