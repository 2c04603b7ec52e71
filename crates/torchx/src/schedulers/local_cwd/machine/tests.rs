//! Table tests of the supervisor's machine: every retry policy against exits, failures beyond
//! the budget, cancels, external kills (preemptions), requeues and time limits. A trace is the
//! actions, one short word each: `start 0,1`, `TERM 1`, `KILL 0`, `USR1 0`, `end 1#0 failed`.

use super::*;
use crate::specs::RetryPolicy::{Application, Replica, Role};

const USR1: i32 = libc::SIGUSR1;
const GRACE: f64 = 10.0;

/// A machine driven by scripted events; every `Start` is launched (successfully unless listed
/// in `fail_launch`) and fed back at once, as the supervisor does.
struct Sim {
    m: Machine,
    trace: Vec<String>,
    fail_launch: Vec<usize>,
}

fn role(policy: RetryPolicy, max_retries: u32) -> RolePolicy {
    RolePolicy::new("r", policy, max_retries)
}

/// A role that opted into the recovery contract (any recovery option).
fn recovering(policy: RetryPolicy, max_retries: u32) -> RolePolicy {
    RolePolicy {
        recovery: true,
        ..role(policy, max_retries)
    }
}

impl Sim {
    fn new(roles: Vec<(RolePolicy, usize)>) -> Sim {
        Sim::with_failed_launches(roles, vec![])
    }

    fn with_failed_launches(roles: Vec<(RolePolicy, usize)>, fail_launch: Vec<usize>) -> Sim {
        let m = Machine::new(roles, GRACE);
        let begin = m.begin();
        let mut sim = Sim {
            m,
            trace: vec![],
            fail_launch,
        };
        sim.apply(0.0, begin);
        sim
    }

    fn apply(&mut self, now: f64, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Start(targets) => {
                    let names: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
                    self.trace.push(format!("start {}", names.join(",")));
                    let results = targets
                        .iter()
                        .map(|&t| (t, self.fail_launch.contains(&t).then(|| "nope".into())))
                        .collect();
                    let next = self.m.on_event(now, Event::Launched(results));
                    self.apply(now, next);
                }
                Action::Signal { slot, signal } => {
                    let name = match signal {
                        SIGTERM => "TERM",
                        SIGKILL => "KILL",
                        USR1 => "USR1",
                        _ => "SIG?",
                    };
                    self.trace.push(format!("{name} {slot}"));
                }
                Action::Ended(e) => self.trace.push(format!(
                    "end {}#{} {}",
                    e.slot,
                    e.attempt,
                    e.reason.as_str()
                )),
                Action::Note(_) => {}
            }
        }
    }

    fn at(&mut self, now: f64, event: Event) -> &mut Sim {
        let actions = self.m.on_event(now, event);
        self.apply(now, actions);
        self
    }

    fn exit(&mut self, now: f64, slot: usize, code: i32) -> &mut Sim {
        self.at(
            now,
            Event::Exited {
                slot,
                exit: Exit::Code(code),
                requeue_asked: false,
                oom: false,
            },
        )
    }

    fn killed(&mut self, now: f64, slot: usize, signal: i32) -> &mut Sim {
        self.at(
            now,
            Event::Exited {
                slot,
                exit: Exit::Signal(signal),
                requeue_asked: false,
                oom: false,
            },
        )
    }

    fn trace(&self) -> String {
        self.trace.join("; ")
    }
}

#[test]
fn success_needs_every_replica() {
    let mut s = Sim::new(vec![(role(Application, 0), 2)]);
    s.exit(1.0, 0, 0);
    assert_eq!(s.m.finished(), None);
    s.exit(2.0, 1, 0);
    assert_eq!(s.m.finished(), Some(AppState::Succeeded));
    assert_eq!(s.trace(), "start 0,1; end 0#0 succeeded; end 1#0 succeeded");
    assert_eq!(s.m.num_restarts(), 0);
}

/// Each policy, one failure within the budget, then success: what restarts.
#[test]
fn a_failure_within_the_budget_restarts_the_policy_scope() {
    let cases = [
        (Replica, &[][..], "start 0,1,2; end 1#0 failed; start 1"),
        (
            Role,
            &[0][..],
            "start 0,1,2; end 1#0 failed; TERM 0; end 0#0 cancelled; start 0,1",
        ),
        (
            Application,
            &[0, 2][..],
            "start 0,1,2; end 1#0 failed; TERM 0; TERM 2; end 0#0 cancelled; end 2#0 cancelled; \
             start 0,1,2",
        ),
    ];
    for (policy, stopped, want) in cases {
        // Role 0 has replicas 0 and 1, role 1 has replica 2.
        let mut s = Sim::new(vec![(role(policy, 1), 2), (role(policy, 1), 1)]);
        s.exit(1.0, 1, 3);
        for &slot in stopped {
            s.killed(2.0, slot, SIGTERM);
        }
        assert_eq!(s.trace(), want, "{policy:?}");
        assert_eq!(s.m.finished(), None, "{policy:?}");
        assert_eq!(s.m.num_restarts(), 1, "{policy:?}");
        assert_eq!(s.m.slots()[1].attempt, 1, "{policy:?}");
        assert_eq!(s.m.slots()[1].state, AppState::Running, "{policy:?}");
    }
}

/// Each policy, failures beyond the budget: the app fails with the last failure's message.
#[test]
fn failures_beyond_the_budget_fail_the_app() {
    for policy in [Replica, Role, Application] {
        for max_retries in [0, 2] {
            let mut s = Sim::new(vec![(role(policy, max_retries), 1)]);
            for n in 0..max_retries {
                s.exit(1.0 + f64::from(n), 0, 1);
            }
            assert_eq!(s.m.finished(), None);
            s.exit(10.0, 0, 7);
            assert_eq!(
                s.m.finished(),
                Some(AppState::Failed),
                "{policy:?} {max_retries}"
            );
            assert_eq!(s.m.message(), "r/0 exited with code 7");
            assert_eq!(s.m.num_restarts(), max_retries);
            assert_eq!(s.m.slots()[0].attempt, max_retries);
        }
    }
}

#[test]
fn a_failure_stops_the_others_and_waits_for_them() {
    let mut s = Sim::new(vec![(role(Application, 0), 3)]);
    s.exit(1.0, 0, 0).exit(2.0, 1, 4);
    assert_eq!(
        s.trace(),
        "start 0,1,2; end 0#0 succeeded; end 1#0 failed; TERM 2"
    );
    assert_eq!(s.m.finished(), None, "replica 2 still runs");
    assert_eq!(s.m.next_deadline(), Some(12.0));
    s.at(12.0, Event::Tick);
    assert!(s.trace().ends_with("TERM 2; KILL 2"), "{}", s.trace());
    s.killed(12.1, 2, SIGKILL);
    assert_eq!(s.m.finished(), Some(AppState::Failed));
    assert_eq!(s.m.slots()[2].state, AppState::Cancelled);
}

#[test]
fn cancel_stops_everything_in_every_phase() {
    for policy in [Replica, Role, Application] {
        // While running.
        let mut s = Sim::new(vec![(role(policy, 3), 2)]);
        s.at(1.0, Event::Cancel);
        assert_eq!(s.trace(), "start 0,1; TERM 0; TERM 1");
        s.killed(2.0, 0, SIGTERM).exit(2.0, 1, 0);
        assert_eq!(s.m.finished(), Some(AppState::Cancelled));
        // A second cancel signals nothing again.
        let mut s = Sim::new(vec![(role(policy, 3), 2)]);
        s.at(1.0, Event::Cancel).at(1.5, Event::Cancel);
        assert_eq!(s.trace(), "start 0,1; TERM 0; TERM 1");
        // During a restart: nothing starts again.
        let mut s = Sim::new(vec![(role(policy, 3), 2)]);
        s.exit(1.0, 0, 1).at(1.5, Event::Cancel);
        s.killed(2.0, 1, SIGTERM);
        if policy == Replica {
            s.killed(2.0, 0, SIGTERM);
        }
        assert_eq!(s.m.finished(), Some(AppState::Cancelled), "{policy:?}");
        assert_eq!(
            s.trace().matches("start").count(),
            1 + usize::from(policy == Replica)
        );
    }
}

#[test]
fn a_replica_that_cannot_start_fails_the_app_and_stops_the_rest() {
    let mut s = Sim::with_failed_launches(vec![(role(Application, 5), 3)], vec![1]);
    assert_eq!(s.trace(), "start 0,1,2; TERM 0; TERM 2");
    assert_eq!(s.m.message(), "r/1 could not start: nope");
    s.killed(1.0, 0, SIGTERM).killed(1.0, 2, SIGTERM);
    assert_eq!(s.m.finished(), Some(AppState::Failed));
}

/// Under the recovery contract an external SIGTERM is a preemption: restarted without spending
/// the budget. A bare SIGKILL (the out-of-memory killer's) is a failure.
#[test]
fn preemptions_requeue_without_spending_the_retry_budget() {
    for policy in [Replica, Role, Application] {
        let mut s = Sim::new(vec![(recovering(policy, 0), 1)]);
        s.killed(1.0, 0, SIGTERM).killed(2.0, 0, SIGTERM);
        assert_eq!(s.m.finished(), None);
        s.exit(3.0, 0, 0);
        assert_eq!(
            s.trace(),
            "start 0; end 0#0 preempted; start 0; end 0#1 preempted; start 0; \
             end 0#2 succeeded"
        );
        assert_eq!(s.m.finished(), Some(AppState::Succeeded));
        let mut s = Sim::new(vec![(recovering(policy, 1), 1)]);
        s.killed(1.0, 0, SIGKILL);
        assert_eq!(s.m.finished(), None, "one retry spent");
        s.killed(2.0, 0, SIGKILL);
        assert_eq!(s.m.finished(), Some(AppState::Failed));
        assert_eq!(
            s.trace(),
            "start 0; end 0#0 failed; start 0; end 0#1 failed"
        );
        // Another signal is a failure.
        let mut s = Sim::new(vec![(recovering(policy, 0), 1)]);
        s.killed(1.0, 0, libc::SIGSEGV);
        assert_eq!(s.m.finished(), Some(AppState::Failed));
        assert!(
            s.m.message().contains("signal 11 (SIGSEGV)"),
            "{}",
            s.m.message()
        );
    }
}

/// A role with no recovery option ends as TorchX's: every kill and every non-zero exit (the
/// requeue code included) spends `max_retries`, and a requeue request is not one.
#[test]
fn without_recovery_options_every_kill_and_exit_is_a_failure() {
    for policy in [Replica, Role, Application] {
        for exit in [Exit::Signal(SIGTERM), Exit::Signal(SIGKILL), Exit::Code(75)] {
            let mut s = Sim::new(vec![(role(policy, 0), 1)]);
            s.at(
                1.0,
                Event::Exited {
                    slot: 0,
                    exit,
                    requeue_asked: true,
                    oom: false,
                },
            );
            assert_eq!(s.m.finished(), Some(AppState::Failed), "{exit:?}");
            assert_eq!(s.trace(), "start 0; end 0#0 failed", "{exit:?}");
            let mut s = Sim::new(vec![(role(policy, 1), 1)]);
            s.at(
                1.0,
                Event::Exited {
                    slot: 0,
                    exit,
                    requeue_asked: false,
                    oom: false,
                },
            );
            assert_eq!(s.m.finished(), None, "{exit:?}: one retry");
            s.at(
                2.0,
                Event::Exited {
                    slot: 0,
                    exit,
                    requeue_asked: false,
                    oom: false,
                },
            );
            assert_eq!(s.m.finished(), Some(AppState::Failed), "{exit:?}");
        }
        let mut s = Sim::new(vec![(role(policy, 0), 1)]);
        s.at(
            1.0,
            Event::Exited {
                slot: 0,
                exit: Exit::Code(0),
                requeue_asked: true,
                oom: false,
            },
        );
        assert_eq!(s.m.finished(), Some(AppState::Succeeded));
    }
}

/// A requeue request through TORCHX_REQUEUE_FILE holds whatever the exit: 0, a failure, the
/// death of a wrapper by the checkpoint signal, a stop at the time limit.
#[test]
fn a_requeue_request_holds_whatever_the_exit() {
    for exit in [
        Exit::Code(0),
        Exit::Code(1),
        Exit::Signal(libc::SIGUSR1),
        Exit::Signal(SIGKILL),
    ] {
        let mut s = Sim::new(vec![(limited(100.0, 30.0, 0), 1)]);
        s.at(70.0, Event::Tick);
        assert!(s.m.checkpointing(0));
        s.at(
            80.0,
            Event::Exited {
                slot: 0,
                exit,
                requeue_asked: true,
                oom: false,
            },
        );
        assert_eq!(s.m.finished(), None, "{exit:?}");
        assert!(!s.m.checkpointing(0), "a new attempt");
        assert_eq!(
            s.trace(),
            "start 0; USR1 0; end 0#0 requeued; start 0",
            "{exit:?}"
        );
        assert_eq!(s.m.slots()[0].msg, "");
    }
    // Stopped at the limit after asking: a requeue, not a timeout.
    let mut s = Sim::new(vec![(limited(100.0, 30.0, 0), 1)]);
    s.at(100.0, Event::Tick);
    s.at(
        101.0,
        Event::Exited {
            slot: 0,
            exit: Exit::Signal(SIGTERM),
            requeue_asked: true,
            oom: false,
        },
    );
    assert_eq!(
        s.trace(),
        "start 0; USR1 0; TERM 0; end 0#0 requeued; start 0"
    );
    // An out-of-memory kill is a failure, even with a request.
    let mut s = Sim::new(vec![(limited(100.0, 30.0, 1), 1)]);
    s.at(
        1.0,
        Event::Exited {
            slot: 0,
            exit: Exit::Signal(SIGKILL),
            requeue_asked: true,
            oom: true,
        },
    );
    assert_eq!(s.trace(), "start 0; end 0#0 oom; start 0");
    assert!(s.m.slots()[0].msg.is_empty(), "a new attempt runs");
    s.at(
        2.0,
        Event::Exited {
            slot: 0,
            exit: Exit::Code(137),
            requeue_asked: false,
            oom: true,
        },
    );
    assert_eq!(s.m.finished(), Some(AppState::Failed));
    assert!(
        s.m.message().ends_with("(out of memory)"),
        "{}",
        s.m.message()
    );
    // A cancel wins over a request.
    let mut s = Sim::new(vec![(limited(100.0, 30.0, 0), 1)]);
    s.at(1.0, Event::Cancel);
    s.at(
        2.0,
        Event::Exited {
            slot: 0,
            exit: Exit::Signal(SIGTERM),
            requeue_asked: true,
            oom: false,
        },
    );
    assert_eq!(s.m.finished(), Some(AppState::Cancelled));
}

#[test]
fn the_requeue_code_requeues_up_to_max_requeues() {
    let mut r = recovering(Replica, 1);
    r.max_requeues = 2;
    let mut s = Sim::new(vec![(r, 1)]);
    s.exit(1.0, 0, 75).exit(2.0, 0, 75);
    assert_eq!(s.m.finished(), None);
    // The retry budget is still whole: one failure restarts.
    s.exit(3.0, 0, 1);
    assert_eq!(s.m.finished(), None);
    s.exit(4.0, 0, 75);
    assert_eq!(s.m.finished(), Some(AppState::Failed));
    assert_eq!(
        s.m.message(),
        "r/0 asked to be requeued (exit code 75); no requeues left (max_requeues=2)"
    );
    assert_eq!(
        s.trace(),
        "start 0; end 0#0 requeued; start 0; end 0#1 requeued; start 0; end 0#2 failed; \
         start 0; end 0#3 requeued"
    );
    // Another requeue code; 75 is then an ordinary failure.
    let mut r = recovering(Replica, 0);
    r.requeue_exit_code = 99;
    let mut s = Sim::new(vec![(r, 1)]);
    s.exit(1.0, 0, 99);
    assert_eq!(s.m.finished(), None);
    s.exit(2.0, 0, 75);
    assert_eq!(s.m.finished(), Some(AppState::Failed));
}

fn limited(time_limit: f64, signal_before: f64, max_retries: u32) -> RolePolicy {
    RolePolicy {
        time_limit: Some(time_limit),
        checkpoint_signal: Some((USR1, signal_before)),
        ..recovering(Replica, max_retries)
    }
}

/// The checkpoint signal before the limit; the replica saves and asks for a requeue.
#[test]
fn a_time_limit_signals_then_a_requeue_starts_a_fresh_attempt() {
    let mut s = Sim::new(vec![(limited(100.0, 30.0, 0), 1)]);
    assert_eq!(s.m.next_deadline(), Some(70.0));
    s.at(69.0, Event::Tick);
    assert_eq!(s.trace(), "start 0");
    s.at(70.0, Event::Tick);
    assert_eq!(s.trace(), "start 0; USR1 0");
    assert_eq!(s.m.next_deadline(), Some(100.0));
    s.exit(75.0, 0, 75);
    // The new attempt has its own limit.
    assert_eq!(s.m.next_deadline(), Some(145.0));
    s.at(145.0, Event::Tick).exit(150.0, 0, 0);
    assert_eq!(
        s.trace(),
        "start 0; USR1 0; end 0#0 requeued; start 0; USR1 0; end 0#1 succeeded"
    );
    assert_eq!(s.m.finished(), Some(AppState::Succeeded));
}

/// At the limit SIGTERM, after the grace SIGKILL; an exit other than the requeue code is a
/// timeout, which spends the budget.
#[test]
fn a_time_limit_without_a_requeue_is_a_failure() {
    let mut s = Sim::new(vec![(limited(100.0, 30.0, 1), 1)]);
    s.at(70.0, Event::Tick).at(100.0, Event::Tick);
    assert_eq!(s.m.next_deadline(), Some(110.0));
    s.at(110.0, Event::Tick).killed(110.0, 0, SIGKILL);
    assert_eq!(
        s.trace(),
        "start 0; USR1 0; TERM 0; KILL 0; end 0#0 timeout; start 0"
    );
    assert_eq!(s.m.finished(), None, "one retry left");
    // The second timeout ends the app; exiting 75 after SIGTERM would have been a requeue.
    s.at(210.0, Event::Tick).exit(211.0, 0, 143);
    assert_eq!(s.m.finished(), Some(AppState::Failed));
    assert_eq!(
        s.m.message(),
        "r/0 exceeded its time limit of 100s and was stopped"
    );
    let mut s = Sim::new(vec![(limited(100.0, 30.0, 0), 1)]);
    s.at(100.0, Event::Tick).exit(101.0, 0, 75);
    assert!(
        s.trace().ends_with("end 0#0 requeued; start 0"),
        "{}",
        s.trace()
    );
}

/// A signal time before the start fires at once; a cancel during a time-limit stop is a cancel.
#[test]
fn time_limit_edges() {
    let mut s = Sim::new(vec![(limited(10.0, 90.0, 0), 1)]);
    assert_eq!(s.m.next_deadline(), Some(0.0));
    s.at(0.0, Event::Tick)
        .at(10.0, Event::Tick)
        .at(11.0, Event::Cancel);
    assert_eq!(s.trace(), "start 0; USR1 0; TERM 0", "no second TERM");
    s.killed(12.0, 0, SIGTERM);
    assert_eq!(s.m.finished(), Some(AppState::Cancelled));
    assert!(s.trace().ends_with("end 0#0 cancelled"), "{}", s.trace());
}

fn watched(recovery: bool, max_retries: u32) -> RolePolicy {
    RolePolicy {
        hang_timeout: Some(20.0),
        recovery,
        ..role(Replica, max_retries)
    }
}

fn hung(slot: usize) -> Event {
    Event::Hung {
        slot,
        detail: "rank 0 in all_reduce".into(),
    }
}

/// Without the recovery contract a hang stops the replica (SIGTERM, SIGKILL after the grace)
/// and is a failure: it spends the retry budget, and beyond it fails the app, saying why.
#[test]
fn a_hang_without_recovery_is_a_failure_that_spends_retries() {
    let mut s = Sim::new(vec![(watched(false, 1), 2)]);
    s.at(30.0, hung(1));
    assert_eq!(s.trace(), "start 0,1; TERM 1");
    assert_eq!(s.m.next_deadline(), Some(40.0));
    s.at(40.0, Event::Tick).killed(40.0, 1, SIGKILL);
    assert_eq!(
        s.trace(),
        "start 0,1; TERM 1; KILL 1; end 1#0 hung; start 1"
    );
    // A second report of the same hang, or of a replica that is not running, changes nothing.
    s.at(41.0, hung(7));
    s.at(60.0, hung(1)).exit(61.0, 1, 0);
    assert!(
        s.trace().ends_with("TERM 1; end 1#1 hung; TERM 0"),
        "{}",
        s.trace()
    );
    assert_eq!(
        s.m.finished(),
        None,
        "replica 0 still runs while the app stops"
    );
    s.killed(62.0, 0, SIGTERM);
    assert_eq!(s.m.finished(), Some(AppState::Failed));
    assert_eq!(
        s.m.message(),
        "r/1 hung: no progress (output or heartbeat) for 20s (rank 0 in all_reduce); its \
         stacks: `torchx log --stacks`"
    );
}

/// Under the recovery contract a hang sends the checkpoint signal first; the replica saves
/// and exits within the grace period (or is stopped at its end), and the attempt is requeued
/// (spending max_requeues, not max_retries).
#[test]
fn a_hang_under_recovery_signals_then_requeues() {
    let mut s = Sim::new(vec![(watched(true, 0), 1)]);
    s.at(30.0, hung(0));
    assert_eq!(s.trace(), "start 0; USR1 0");
    assert!(s.m.checkpointing(0));
    s.exit(35.0, 0, 75);
    assert_eq!(s.trace(), "start 0; USR1 0; end 0#0 hung; start 0");
    // The next attempt that hangs and does not exit is stopped when its window closes.
    s.at(60.0, hung(0))
        .at(70.0, Event::Tick)
        .killed(71.0, 0, SIGTERM);
    assert!(
        s.trace()
            .ends_with("start 0; USR1 0; TERM 0; end 0#1 hung; start 0"),
        "{}",
        s.trace()
    );
    // With no requeue left, a hang fails the app.
    let mut s = Sim::new(vec![(
        RolePolicy {
            max_requeues: 0,
            ..watched(true, 0)
        },
        1,
    )]);
    s.at(30.0, hung(0)).exit(31.0, 0, 75);
    assert_eq!(s.m.finished(), Some(AppState::Failed));
}

#[test]
fn exits_of_unknown_or_finished_slots_change_nothing() {
    let mut s = Sim::new(vec![(role(Application, 0), 1)]);
    s.exit(1.0, 0, 0);
    s.exit(2.0, 0, 1).exit(2.0, 7, 1);
    assert_eq!(s.trace(), "start 0; end 0#0 succeeded");
    assert_eq!(s.m.finished(), Some(AppState::Succeeded));
}

#[test]
fn changes_are_reported_once() {
    let mut s = Sim::new(vec![(role(Application, 0), 2)]);
    assert_eq!(s.m.take_changed(), vec![0, 1]);
    assert!(s.m.take_changed().is_empty());
    s.exit(1.0, 1, 0);
    assert_eq!(s.m.take_changed(), vec![1]);
}
