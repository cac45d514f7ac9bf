//! Which run to start next: sequential and targeted. A scenario asking "can it
//! break?" stops at its first counterexample (or after `--runs` runs); a twin
//! asking "does the fence hold?" waits for its recipe's unfenced scenario, runs
//! only if that broke through a provoked run, and then until it has its floor of
//! provoked runs, a flagged run, or its cap (a twin whose runs seldom provoke
//! must not eat the whole budget, and one whose first `--runs` runs provoked so
//! seldom that even the upper end of its rate's interval would not reach the
//! floor within the cap stops there: below its floor, the verdict says so).
//! Pure: the tallies in, a decision out.
//!
//! A break whose deposed holder never wrote after its successor's grant (a
//! retired adapter that never answered `held` counts as holding to the end: two
//! holders, no late write) is a break of the lock, but it gave no fence anything
//! to turn away, and its twins' runs could hardly ever be provoked: asked, they
//! would only take the budget from the twins that can. So a "can it break?"
//! scenario whose recipe has twins stops at its first *provoked* break; one that
//! breaks only unprovoked runs on to its `--runs`, looking for a provoked one
//! (an unfenced run costs less than the twins it may open), and if none comes its
//! twins are not asked. A break of the token itself (reissued or going
//! backwards) counts as provoked here: whatever any holder wrote, the fence
//! would compare tokens that no longer follow the lock. A scenario with no twin
//! (a holder's clock fault) stops at its first break of any class: nothing
//! waits on how it broke.

use super::battery::Question;
use super::stats::wilson;

/// A "can it break?" scenario runs until it has `--runs` checked runs, starting
/// at most this many times that: a run nobody checked (the checker gave up, the
/// run failed, no client acquired once the fault had begun) is no pass, and
/// one that did not break in fewer checked runs leaves the verdict lacking
/// them (`decide`). etcd's leader isolated checked 8 of 10 runs (2 with no
/// client acquiring after the fault: docs/audits/etcd-provoked.json).
pub const RECHECK: u32 = 2;

/// Provoked runs a claim that a fence holds needs unless `--provoked` says
/// otherwise: a floor below it makes an exploratory audit, never a complete one
/// (20 clean provoked runs bound the failure rate at ≤ 13.9%, 95% exact; 3 at
/// ≤ 63.2%).
pub const DEFAULT_FLOOR: u32 = 20;

/// Runs of a fenced "does it hold?" scenario at most, per provoked run of its
/// floor, unless `--twin-runs` says otherwise. A twin whose runs provoke one
/// time in five (nats' kill and restart, fenced: 24 provoked of 118 runs, 22 of
/// them not counted; disk full 20 of 102) needs about 120 for a floor of 20: at
/// 3 a provoked run it stopped at 60, below its floor, the 60 runs spent for
/// nothing the verdict could rest on. A twin whose share is lower still stops
/// early, by [`Plan::want`]'s interval, not by this cap.
pub const CAP_PER_FLOOR: u32 = 6;

/// Runs with no failure among them that bound a failure rate at `p` or below,
/// one-sided 95 %, exact (Clopper–Pearson: 0 of n gives 1 − 0.05^(1/n)): 299
/// for 1 %, 149 for 2 %, 59 for 5 %. `--bound` asks this many of every claim.
pub fn runs_for_bound(p: f64) -> u32 {
    (0.05f64.ln() / (1.0 - p).ln()).ceil() as u32
}

/// Runs of a twin after which one whose share of provoked runs could not reach
/// its floor within its cap stops: 20 runs show a share well enough (0 of 20
/// provoked is ≤ 16.8 % by Wilson), and a larger `--runs` (a `--bound`) should
/// not keep a twin that never reaches the danger going for that long.
pub const JUDGE_SHARE_AFTER: u32 = 20;

/// Which share of an audit's runs this process runs: shard `index` of `of`
/// (1-based) takes run numbers `index`, `index + of`, … of every scenario, so
/// that any machine given the same flags runs the same runs with the same
/// seeds, and the shards together run what one machine would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Share {
    pub index: u32,
    pub of: u32,
}

impl Share {
    pub const WHOLE: Share = Share { index: 1, of: 1 };

    /// Of `n` runs (numbered 1..=n), how many are this shard's.
    pub fn of_count(self, n: u32) -> u32 {
        match n.checked_sub(self.index) {
            Some(rest) => rest / self.of + 1,
            None => 0,
        }
    }

    /// The audit-wide number of this shard's `local`-th run (1-based).
    pub fn run(self, local: u32) -> u32 {
        self.index + (local - 1) * self.of
    }

    /// Which of this shard's runs (1-based) audit-wide run `run` is, if it is
    /// this shard's.
    pub fn local(self, run: u32) -> Option<u32> {
        let past = run.checked_sub(self.index)?;
        (past % self.of == 0).then_some(past / self.of + 1)
    }
}

/// Which questions this process asks: all of them, or one phase of a sharded
/// audit. A twin is asked only where its recipe broke unfenced; across shards
/// that is known only once the "can it break?" runs of every shard are merged,
/// so a sharded audit asks them first (`Breaks`) and the twins the merge found
/// asked after (`Twins`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Whole,
    Breaks,
    /// By battery index: whether the merged first phase asked the twin.
    Twins {
        asked: Vec<bool>,
    },
}

/// One scenario's runs so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub started: u32,
    pub in_flight: u32,
    /// Ended and checked (valid or flagged): a run whose checker gave up, that
    /// failed, or in which no client acquired after the fault is not.
    pub checked: u32,
    /// Ended and checked, flagged.
    pub flagged: u32,
    /// Of those, provoked: a deposed holder's late write reached the resource,
    /// so a fence would have had a write to turn away.
    pub flagged_provoked: u32,
    /// Of the flagged, those whose tokens were reissued or went backwards: the
    /// token source lost what it had handed out, with or without a deposed
    /// holder's late write, so a fence has the break to answer either way.
    pub flagged_token: u32,
    /// Ended, checked and provoked (flagged or not).
    pub provoked: u32,
    /// Ended valid with the fault out of reach of what the holder asks.
    pub out_of_reach: u32,
}

impl Tally {
    /// A break a fence must answer: a deposed holder's late write reached the
    /// resource, or the tokens a fence compares no longer follow the lock
    /// (measured: Redis without an AOF, killed, hands its `INCR` tokens out again
    /// in 10 of 10 runs where no deposed holder wrote late; waiting for a
    /// provoked one left the fenced twin unasked and the audit said
    /// `safe-with-fencing`).
    pub fn asks_the_fence(&self) -> bool {
        self.flagged_provoked > 0 || self.flagged_token > 0
    }
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
    /// A flagged run: the counterexample (for a "can it break?" scenario with
    /// twins, a provoked one).
    Broke,
    /// A "can it break?" scenario ran its `--runs` with no break.
    RanOut,
    /// A "can it break?" scenario ran its `--runs` and broke, but only through
    /// deposed holders none of whose late writes reached the resource.
    BrokeUnprovoked,
    /// A twin reached its floor of provoked runs.
    Floor,
    /// A twin ran its cap without reaching its floor.
    Cap,
    /// A twin whose recipe never broke unfenced: nothing for its fence to hold against.
    NotAsked,
    /// A twin whose recipe broke unfenced only unprovoked: the break's deposed
    /// holder never wrote after its successor's grant, so no fence was asked.
    NoLateWrite,
    /// A run showed the fault never reaches what the holder asks whether it
    /// holds: no run of the scenario can test it.
    OutOfReach,
    /// A phase of a sharded audit that does not ask it: its runs are the other
    /// phase's.
    OtherPhase,
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
    pub phase: Phase,
}

impl Plan {
    /// `runs` for each "can it break?" scenario and each twin whose holder fences
    /// itself (no verdict rests on it, and a self-fencing holder that works
    /// withholds its late writes: its runs seldom provoke); `twin_runs` for a
    /// fenced twin, on which the verdict rests.
    pub fn new(
        questions: Vec<Question>,
        fenced: &[bool],
        runs: u32,
        floor: u32,
        twin_runs: u32,
    ) -> Plan {
        let caps = questions
            .iter()
            .zip(fenced)
            .map(|(q, &fenced)| match q {
                Question::DoesItHold { .. } if fenced => twin_runs,
                _ => runs,
            })
            .collect();
        Plan {
            questions,
            caps,
            floor,
            unprovoked_after: runs.min(JUDGE_SHARE_AFTER),
            phase: Phase::Whole,
        }
    }

    /// The plan for a battery's scenarios: the questions they ask, and which of
    /// them are fenced (a fenced twin's cap is `twin_runs`).
    pub fn of_battery(
        scenarios: &[super::battery::Scenario],
        runs: u32,
        floor: u32,
        twin_runs: u32,
    ) -> Plan {
        let fenced: Vec<bool> = scenarios
            .iter()
            .map(|s| s.fencing == super::battery::Fencing::Fenced)
            .collect();
        Plan::new(
            super::battery::questions(scenarios),
            &fenced,
            runs,
            floor,
            twin_runs,
        )
    }

    /// This plan's share for shard `share` in `phase`: each cap, the floor and
    /// the runs before a twin's share is judged cut to the shard's run numbers,
    /// so that the shards' runs add up to the whole plan's.
    pub fn shard(&self, share: Share, phase: Phase) -> Plan {
        Plan {
            questions: self.questions.clone(),
            caps: self.caps.iter().map(|&c| share.of_count(c)).collect(),
            floor: share.of_count(self.floor),
            unprovoked_after: share.of_count(self.unprovoked_after).max(1),
            phase,
        }
    }

    /// Runs of scenario `i` wanted: checked ones for a "can it break?"
    /// scenario, started ones for a twin.
    pub fn cap(&self, i: usize) -> u32 {
        self.caps[i]
    }

    /// Runs of scenario `i` it may start at most (none in a phase that does
    /// not ask it).
    pub fn most(&self, i: usize) -> u32 {
        let other_phase = matches!(
            (&self.phase, self.questions[i]),
            (Phase::Breaks, Question::DoesItHold { .. })
                | (Phase::Twins { .. }, Question::CanItBreak)
        );
        if other_phase {
            return 0;
        }
        match self.questions[i] {
            Question::CanItBreak => self.caps[i] * RECHECK,
            Question::DoesItHold { .. } => self.caps[i],
        }
    }

    pub fn want(&self, i: usize, tallies: &[Tally]) -> Want {
        let t = tallies[i];
        let ran_out = |why| match t.in_flight {
            0 => Want::Done(why),
            _ => Want::Wait,
        };
        if t.out_of_reach > 0 && t.flagged == 0 {
            // A break already seen stands; one run out of reach says the rest
            // would be too.
            return Want::Done(Why::OutOfReach);
        }
        match (&self.phase, self.questions[i]) {
            (Phase::Breaks, Question::DoesItHold { .. }) => return Want::Done(Why::OtherPhase),
            (Phase::Twins { .. }, Question::CanItBreak) => return Want::Done(Why::OtherPhase),
            (Phase::Twins { asked }, Question::DoesItHold { .. }) if !asked[i] => {
                return Want::Done(Why::NotAsked)
            }
            _ => {}
        }
        let merged_asked = matches!(self.phase, Phase::Twins { .. });
        match self.questions[i] {
            Question::CanItBreak if t.asks_the_fence() => Want::Done(Why::Broke),
            Question::CanItBreak if t.flagged > 0 && !self.awaited(i) => Want::Done(Why::Broke),
            Question::CanItBreak
                if t.checked >= self.cap(i) || t.started >= self.cap(i) * RECHECK =>
            {
                ran_out(match t.flagged {
                    0 => Why::RanOut,
                    _ => Why::BrokeUnprovoked,
                })
            }
            // Enough in flight to make its checked runs if each is checked: wait.
            Question::CanItBreak
                if t.started >= self.cap(i) && t.checked + t.in_flight >= self.cap(i) =>
            {
                Want::Wait
            }
            Question::CanItBreak => Want::Start,
            Question::DoesItHold { .. } if t.flagged > 0 => Want::Done(Why::Broke),
            Question::DoesItHold { unfenced } => {
                if !merged_asked && !tallies[unfenced].asks_the_fence() {
                    return match self.want(unfenced, tallies) {
                        Want::Done(Why::BrokeUnprovoked) => Want::Done(Why::NoLateWrite),
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

    /// Whether some twin waits on scenario `i`'s break.
    fn awaited(&self, i: usize) -> bool {
        self.questions
            .contains(&Question::DoesItHold { unfenced: i })
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

    /// holder-pause unfenced (0) and fenced (1); slow-links unfenced (2) and
    /// fenced (3); its fenced twins' cap at 60 runs.
    fn plan() -> Plan {
        plan_with_twin_runs(60)
    }

    /// [`plan`] with its fenced twins' cap at `twin_runs`.
    fn plan_with_twin_runs(twin_runs: u32) -> Plan {
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
            twin_runs,
        )
    }

    /// Tallies where holder-pause broke unfenced in a provoked run: its fenced
    /// twin (1) is asked.
    fn after_a_provoked_break() -> Vec<Tally> {
        let mut t = vec![Tally::default(); 4];
        t[0].flagged = 1;
        t[0].flagged_provoked = 1;
        t
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
            flagged_provoked: 1,
            provoked: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(0, &t), Want::Done(Why::Broke));
        assert_eq!(p.want(1, &t), Want::Start);
        // slow-links ran its 10 runs without a break: its twin is never asked.
        t[2].started = 10;
        t[2].checked = 10;
        assert_eq!(p.want(2, &t), Want::Done(Why::RanOut));
        assert_eq!(p.want(3, &t), Want::Done(Why::NotAsked));
        t[2].in_flight = 1;
        assert_eq!(p.want(2, &t), Want::Wait);
        assert_eq!(p.want(3, &t), Want::Wait);
    }

    /// The Go etcd Mutex case: a retired holder makes two holders and never
    /// writes again; its twins could hardly ever be provoked.
    #[test]
    fn an_unprovoked_break_runs_on_for_a_provoked_one_and_opens_no_twin() {
        let p = plan();
        let mut t = vec![Tally::default(); 4];
        t[0] = Tally {
            started: 1,
            flagged: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(0, &t), Want::Start);
        assert_eq!(p.want(1, &t), Want::Wait);
        // Its --runs ran, every break unprovoked: a break, but no twin is asked.
        t[0] = Tally {
            started: 10,
            in_flight: 1,
            checked: 9,
            flagged: 4,
            provoked: 2,
            ..Tally::default()
        };
        assert_eq!(p.want(0, &t), Want::Wait);
        assert_eq!(p.want(1, &t), Want::Wait);
        t[0].in_flight = 0;
        t[0].checked = 10;
        assert_eq!(p.want(0, &t), Want::Done(Why::BrokeUnprovoked));
        assert_eq!(p.want(1, &t), Want::Done(Why::NoLateWrite));
        assert_eq!(p.next(&t, &[false; 4]), Some(2));
        // A provoked break before the cap: the twin starts.
        t[0] = Tally {
            started: 6,
            in_flight: 1,
            flagged: 2,
            flagged_provoked: 1,
            provoked: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(0, &t), Want::Done(Why::Broke));
        assert_eq!(p.want(1, &t), Want::Start);
        // A scenario no twin waits on stops at its first break of any class.
        let lone = Plan::new(vec![Question::CanItBreak], &[false], 10, 20, 60);
        let t = [Tally {
            started: 1,
            flagged: 1,
            ..Tally::default()
        }];
        assert_eq!(lone.want(0, &t), Want::Done(Why::Broke));
    }

    /// Redis without an AOF, killed: its tokens start over in every run, while
    /// nobody deposed wrote late. The token broke: the twin is asked at once.
    #[test]
    fn a_break_of_the_token_opens_the_twin_without_a_late_write() {
        let p = plan();
        let mut t = vec![Tally::default(); 4];
        t[0] = Tally {
            started: 1,
            flagged: 1,
            flagged_token: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(0, &t), Want::Done(Why::Broke));
        assert_eq!(p.want(1, &t), Want::Start);
        t[1] = Tally {
            started: 1,
            flagged: 1,
            flagged_token: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Done(Why::Broke), "flagged: no floor");
    }

    #[test]
    fn a_twin_runs_to_its_floor_of_provoked_runs_or_its_cap() {
        let p = plan();
        let mut t = after_a_provoked_break();
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
        let p = Plan::new(p.questions, &[false, false, false, false], 10, 20, 60);
        t[1] = Tally {
            started: 10,
            provoked: 0,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Done(Why::Cap));
    }

    /// `--twin-runs` moves a fenced twin's cap, and with it how seldom its runs
    /// may provoke before it stops: nats' kill and restart, fenced, stopped at 5
    /// provoked of 25 under a cap of 60, the default then (the Wilson
    /// interval's upper end, 40 %, would bring 14 more in 35); with 200 it goes
    /// on to its floor.
    #[test]
    fn twin_runs_lets_a_seldom_provoked_twin_go_on_to_its_floor() {
        let mut t = after_a_provoked_break();
        t[1] = Tally {
            started: 25,
            provoked: 5,
            ..Tally::default()
        };
        assert_eq!(plan().want(1, &t), Want::Done(Why::Cap));
        let long = plan_with_twin_runs(200);
        assert_eq!(long.cap(1), 200);
        assert_eq!(long.want(1, &t), Want::Start);
        t[1] = Tally {
            started: 100,
            provoked: 20,
            ..Tally::default()
        };
        assert_eq!(long.want(1, &t), Want::Done(Why::Floor));
        // Still bounded: 0 provoked of 60 stops even a cap of 200.
        t[1] = Tally {
            started: 60,
            ..Tally::default()
        };
        assert_eq!(long.want(1, &t), Want::Done(Why::Cap));
        t[1].started = 200;
        t[1].provoked = 19;
        assert_eq!(long.want(1, &t), Want::Done(Why::Cap));
        // The "can it break?" scenarios keep --runs.
        assert_eq!(long.cap(0), 10);
    }

    /// The default cap takes a twin whose runs provoke one time in five (nats'
    /// kill and restart, fenced: 24 of 118) to its floor, run by run, where 3
    /// runs a provoked one stopped it at 60; one in ten still stops well short
    /// of the cap, by its interval.
    #[test]
    fn the_default_cap_takes_a_one_in_five_twin_to_its_floor() {
        let p = plan_with_twin_runs(20 * CAP_PER_FLOOR);
        let run_until_done = |every: u32| {
            let mut t = after_a_provoked_break();
            loop {
                match p.want(1, &t) {
                    Want::Start => {
                        t[1].started += 1;
                        t[1].provoked += u32::from(t[1].started.is_multiple_of(every));
                    }
                    Want::Done(why) => return (why, t[1].started, t[1].provoked),
                    Want::Wait => panic!("nothing in flight: {:?}", t[1]),
                }
            }
        };
        assert_eq!(run_until_done(5), (Why::Floor, 100, 20));
        let (why, started, provoked) = run_until_done(10);
        assert_eq!((why, provoked), (Why::Cap, started / 10));
        assert!(
            started < 20 * CAP_PER_FLOOR,
            "stopped by its interval at {started}"
        );
    }

    /// A run that showed the fault out of reach of what the holder asks ends
    /// its scenario, whatever it asked; a break seen first still stands.
    #[test]
    fn one_run_out_of_reach_ends_its_scenario() {
        let p = plan();
        let mut t = vec![Tally::default(); 4];
        t[2] = Tally {
            started: 2,
            in_flight: 1,
            out_of_reach: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(2, &t), Want::Done(Why::OutOfReach));
        assert_eq!(p.next(&t, &[false; 4]), Some(0));
        t[2].flagged = 1;
        t[2].flagged_provoked = 1;
        assert_eq!(p.want(2, &t), Want::Done(Why::Broke));
        t[0] = Tally {
            started: 1,
            flagged: 1,
            flagged_provoked: 1,
            provoked: 1,
            ..Tally::default()
        };
        t[1] = Tally {
            started: 1,
            out_of_reach: 1,
            ..Tally::default()
        };
        assert_eq!(p.want(1, &t), Want::Done(Why::OutOfReach));
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
        t[0].checked = 10;
        t[2].checked = 10;
        assert_eq!(p.next(&t, &[false; 4]), None);
    }

    /// The Go Mutex's wiped restart: 4 of 10 runs checked, 6 with no client
    /// acquiring after the fault. A run nobody checked is made up for, up to
    /// twice `--runs` started; then the scenario stops short, and `decide`
    /// says so.
    #[test]
    fn a_scenario_runs_on_for_its_checked_runs_up_to_twice_its_runs() {
        let p = plan();
        let mut t = vec![Tally::default(); 4];
        t[2] = Tally {
            started: 10,
            checked: 8,
            ..Tally::default()
        };
        assert_eq!(p.want(2, &t), Want::Start);
        // Two in flight may make it up: wait for them.
        t[2].started = 12;
        t[2].in_flight = 2;
        assert_eq!(p.want(2, &t), Want::Wait);
        t[2].in_flight = 0;
        t[2].checked = 10;
        assert_eq!(p.want(2, &t), Want::Done(Why::RanOut));
        // Never checked enough: twice its runs started, it stops.
        t[2] = Tally {
            started: 20,
            checked: 8,
            ..Tally::default()
        };
        assert_eq!(p.want(2, &t), Want::Done(Why::RanOut));
        assert_eq!(p.most(2), 20);
        assert_eq!(p.most(3), 60);
    }
}
