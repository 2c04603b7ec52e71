//! The recovery contract's spellings and a role's effective settings: attempt time limits
//! (`90s`, `30m`, `4h`, `1d2h`), the checkpoint signal (`USR1@90`: SIGUSR1 90 s before the
//! limit), the requeue exit code (75, EX_TEMPFAIL) and the requeue budget. Requeues (that exit
//! code, a preemption, a lost node) never spend `max_retries`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// The exit code that asks for a requeue unless a role names another: EX_TEMPFAIL.
pub const DEFAULT_REQUEUE_EXIT_CODE: i32 = 75;
/// How many requeues a role gets unless it names another number.
pub const DEFAULT_MAX_REQUEUES: u32 = 100;
/// The checkpoint signal of a role with a time limit and no signal of its own (a limit under
/// six minutes gets it earlier: [`default_checkpoint_signal`]).
pub const DEFAULT_CHECKPOINT_SIGNAL: CheckpointSignal = CheckpointSignal {
    signal: Signal::Usr1,
    seconds: 90,
};

/// The checkpoint signal of a role with time limit `limit` (seconds) and no signal of its own:
/// [`DEFAULT_CHECKPOINT_SIGNAL`], but never more than a quarter of the limit before its end, so
/// a short limit never signals a job as it starts (`--time_limit 20s`: `USR1@5`).
pub fn default_checkpoint_signal(limit: u64) -> CheckpointSignal {
    CheckpointSignal {
        seconds: DEFAULT_CHECKPOINT_SIGNAL.seconds.min(limit / 4),
        ..DEFAULT_CHECKPOINT_SIGNAL
    }
}

/// `90s`, `30m`, `4h`, `2d`, and sums of them (`1d2h`, `1h30m`); a bare number is seconds.
/// Returns seconds.
pub fn parse_duration(s: &str) -> Result<u64> {
    let bad = || {
        Error::arg(format!(
            "`{s}` is not a duration: give a number of seconds or units like 90s, 30m, 4h, 1d2h"
        ))
    };
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(secs);
    }
    let (mut total, mut digits) = (0u64, String::new());
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

/// `1d2h`, `30m`, `1h30m5s`: seconds the way [`parse_duration`] reads them.
pub fn format_duration(secs: u64) -> String {
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    let mut rest = secs;
    for (unit, name) in [(86400, 'd'), (3600, 'h'), (60, 'm'), (1, 's')] {
        if rest >= unit {
            out.push_str(&format!("{}{name}", rest / unit));
            rest %= unit;
        }
    }
    out
}

/// A signal a job may ask for before its time limit: the ones Slurm's `--signal`, LSF's `-wa`
/// and `kill` all name the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// SIGHUP.
    Hup,
    /// SIGINT.
    Int,
    /// SIGQUIT.
    Quit,
    /// SIGUSR1 (the default).
    Usr1,
    /// SIGUSR2.
    Usr2,
    /// SIGALRM.
    Alrm,
    /// SIGTERM.
    Term,
    /// SIGCONT.
    Cont,
}

impl Signal {
    const ALL: [Signal; 8] = [
        Signal::Hup,
        Signal::Int,
        Signal::Quit,
        Signal::Usr1,
        Signal::Usr2,
        Signal::Alrm,
        Signal::Term,
        Signal::Cont,
    ];

    /// Its name without `SIG`: `USR1`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Hup => "HUP",
            Signal::Int => "INT",
            Signal::Quit => "QUIT",
            Signal::Usr1 => "USR1",
            Signal::Usr2 => "USR2",
            Signal::Alrm => "ALRM",
            Signal::Term => "TERM",
            Signal::Cont => "CONT",
        }
    }

    /// Its number on this platform.
    pub fn number(self) -> i32 {
        match self {
            Signal::Hup => libc::SIGHUP,
            Signal::Int => libc::SIGINT,
            Signal::Quit => libc::SIGQUIT,
            Signal::Usr1 => libc::SIGUSR1,
            Signal::Usr2 => libc::SIGUSR2,
            Signal::Alrm => libc::SIGALRM,
            Signal::Term => libc::SIGTERM,
            Signal::Cont => libc::SIGCONT,
        }
    }
}

impl FromStr for Signal {
    type Err = Error;
    /// `USR1`, `SIGUSR1`, `usr1`.
    fn from_str(s: &str) -> Result<Signal> {
        let upper = s.trim().to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        Signal::ALL
            .into_iter()
            .find(|sig| sig.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Signal::ALL.iter().map(|s| s.name()).collect();
                Error::arg(format!(
                    "`{s}` is not a signal a job can be sent before its time limit; use one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// `SIG@SECONDS`: send SIG that many seconds before the attempt's time limit (and, where the
/// scheduler announces one, at an eviction or preemption).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CheckpointSignal {
    /// Which signal.
    pub signal: Signal,
    /// How long before the limit.
    pub seconds: u64,
}

impl FromStr for CheckpointSignal {
    type Err = Error;
    /// `USR1@90`, `SIGTERM@120`, `USR2@5m`.
    fn from_str(s: &str) -> Result<CheckpointSignal> {
        let (sig, when) = s.split_once('@').ok_or_else(|| {
            Error::arg(format!(
                "checkpoint signal `{s}` is not SIG@SECONDS (e.g. USR1@90: SIGUSR1 90 seconds \
                 before the time limit)"
            ))
        })?;
        Ok(CheckpointSignal {
            signal: sig.parse()?,
            seconds: parse_duration(when)?,
        })
    }
}

impl fmt::Display for CheckpointSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.signal.name(), self.seconds)
    }
}

impl Serialize for CheckpointSignal {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CheckpointSignal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A time limit in an AppDef file or JSON: seconds, or a duration string (`4h`).
pub(crate) fn deserialize_time_limit<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<u64>, D::Error> {
    deserialize_seconds(d, "time_limit", "a time limit")
}

/// `hang_timeout` as a role field: seconds, or a duration (`"5m"`).
pub(crate) fn deserialize_hang_timeout<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<u64>, D::Error> {
    deserialize_seconds(d, "hang_timeout", "a hang timeout")
}

fn deserialize_seconds<'de, D: Deserializer<'de>>(
    d: D,
    key: &str,
    what: &str,
) -> std::result::Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(u64),
        Text(String),
        // Anything else (a negative or fractional number, ...): said as such below.
        Other(serde_json::Value),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Seconds(s)) => Ok(Some(s)),
        Some(Raw::Other(v)) => Err(serde::de::Error::custom(format!(
            "{key} {v} is not {what}: seconds (a positive number) or a duration such as \"4h\" \
             or \"90m\""
        ))),
        Some(Raw::Text(t)) => parse_duration(&t)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// The keys (`torchx run` flags, `[cli:run]` keys, pipeline step keys) of the retry and
/// recovery options, and of the hang watchdog.
pub const RECOVERY_KEYS: [&str; 7] = [
    "time_limit",
    "hang_timeout",
    "checkpoint_signal",
    "max_retries",
    "requeue_exit_code",
    "max_requeues",
    "checkpoint_dir",
];

/// A role's recovery settings with the defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// Wall-clock seconds of one attempt.
    pub time_limit: Option<u64>,
    /// The signal before the limit (`USR1@90` by default when there is a limit).
    pub checkpoint_signal: Option<CheckpointSignal>,
    /// The exit code that asks for a requeue.
    pub requeue_exit_code: i32,
    /// Requeues allowed (they do not spend `max_retries`).
    pub max_requeues: u32,
}

impl super::AppDef {
    /// The recovery settings of a job that a scheduler limits, signals and restarts as a whole
    /// (Slurm, AWS Batch, SageMaker): every role that sets them must agree. `None` when no role
    /// asks for recovery.
    pub fn job_recovery(&self, scheduler: &str) -> Result<Option<Recovery>> {
        let Some(first) = self.roles.iter().find(|r| r.uses_recovery()) else {
            return Ok(None);
        };
        let recovery = first.recovery();
        match self.roles.iter().find(|r| r.recovery() != recovery) {
            Some(other) => Err(Error::unsupported(
                scheduler,
                format!(
                    "roles `{}` and `{}` with different recovery settings: it limits, signals \
                     and restarts the whole job (give them the same time_limit, \
                     checkpoint_signal, requeue_exit_code and max_requeues)",
                    first.name, other.name
                ),
            )),
            None => Ok(Some(recovery)),
        }
    }
}

/// What torchrun forwards to its workers unless told otherwise (`--signals-to-handle`'s
/// default); any other signal kills torchrun and leaves its workers orphaned.
const TORCHRUN_SIGNALS: [&str; 4] = ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"];

/// The environment form of torchrun's `--signals-to-handle` (its options read `PET_<NAME>`).
/// A torch without the option (torch 2.15 has it) ignores it.
pub const TORCHRUN_SIGNALS_ENV: &str = "PET_SIGNALS_TO_HANDLE";

impl super::Role {
    /// Whether the role runs torchrun: `torchrun ...`, `python -m torch.distributed.run ...`,
    /// or either as a shell's command (`sh -c "torchrun ..."`).
    pub fn runs_torchrun(&self) -> bool {
        let is_torchrun = |word: &str| word.rsplit('/').next() == Some("torchrun");
        is_torchrun(&self.entrypoint)
            || self.args.iter().any(|a| {
                a == "torch.distributed.run"
                    || a.split_whitespace()
                        .any(|w| is_torchrun(w) || w == "torch.distributed.run")
            })
    }

    /// Under the recovery contract, a torchrun role forwards its checkpoint signal to its
    /// workers (`PET_SIGNALS_TO_HANDLE`, unless the role sets it) instead of dying of it and
    /// orphaning them; the signals it forwards anyway are left as they are.
    pub fn forward_checkpoint_signal_through_torchrun(&mut self) {
        let Some(signal) = self.recovery().checkpoint_signal.map(|s| s.signal) else {
            return;
        };
        let name = format!("SIG{}", signal.name());
        if !self.uses_recovery()
            || TORCHRUN_SIGNALS.contains(&name.as_str())
            || self.env.contains_key(TORCHRUN_SIGNALS_ENV)
            || !self.runs_torchrun()
        {
            return;
        }
        let mut signals = TORCHRUN_SIGNALS.join(",");
        signals.push(',');
        signals.push_str(&name);
        self.env.insert(TORCHRUN_SIGNALS_ENV.into(), signals);
    }

    /// This role's recovery settings, defaults applied.
    pub fn recovery(&self) -> Recovery {
        Recovery {
            time_limit: self.time_limit,
            checkpoint_signal: self
                .checkpoint_signal
                .or(self.time_limit.map(default_checkpoint_signal)),
            requeue_exit_code: self.requeue_exit_code.unwrap_or(DEFAULT_REQUEUE_EXIT_CODE),
            max_requeues: self.max_requeues.unwrap_or(DEFAULT_MAX_REQUEUES),
        }
    }

    /// Whether the role sets any recovery option itself (one a scheduler must honour or
    /// refuse).
    pub fn uses_recovery(&self) -> bool {
        self.time_limit.is_some()
            || self.checkpoint_signal.is_some()
            || self.requeue_exit_code.is_some()
            || self.max_requeues.is_some()
            || self.checkpoint_dir.is_some()
    }

    /// The recovery options this role sets, by their `torchx run` names.
    pub fn recovery_options(&self) -> Vec<&'static str> {
        [
            (self.time_limit.is_some(), "time_limit"),
            (self.checkpoint_signal.is_some(), "checkpoint_signal"),
            (self.requeue_exit_code.is_some(), "requeue_exit_code"),
            (self.max_requeues.is_some(), "max_requeues"),
            (self.checkpoint_dir.is_some(), "checkpoint_dir"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }

    /// `TORCHX_CHECKPOINT_DIR` for a container scheduler under the recovery contract: the
    /// role's `checkpoint_dir`, which must be an absolute path on one of its bind or volume
    /// mounts (what a container writes elsewhere is gone with it). `None` without recovery.
    pub fn container_checkpoint_dir(&self) -> Result<Option<String>> {
        if !self.uses_recovery() {
            return Ok(None);
        }
        let role = &self.name;
        let Some(dir) = &self.checkpoint_dir else {
            return Err(Error::spec(format!(
                "role `{role}`: a container's TORCHX_CHECKPOINT_DIR must outlive it: give \
                 --checkpoint_dir PATH on one of the role's mounts (e.g. --mounts \
                 type=volume,src=ckpt,dst=/ckpt --checkpoint_dir /ckpt)"
            )));
        };
        let path = std::path::Path::new(dir);
        let mounted = self.mounts.iter().any(|m| match m {
            super::Mount::Bind { dst_path, .. } | super::Mount::Volume { dst_path, .. } => {
                path.is_absolute() && path.starts_with(dst_path)
            }
            super::Mount::Device { .. } => false,
        });
        if !mounted {
            let dsts: Vec<String> =
                self.mounts
                    .iter()
                    .filter_map(|m| match m {
                        super::Mount::Bind { dst_path, .. }
                        | super::Mount::Volume { dst_path, .. } => Some(dst_path.clone()),
                        super::Mount::Device { .. } => None,
                    })
                    .collect();
            return Err(Error::spec(format!(
                "role `{role}`: checkpoint_dir `{dir}` is not an absolute path on one of the \
                 role's mounts ({})",
                if dsts.is_empty() {
                    "it has none".to_string()
                } else {
                    dsts.join(", ")
                }
            )));
        }
        Ok(Some(dir.clone()))
    }

    /// Checks the recovery fields: a time limit of at least a second, a signal that comes
    /// before it, a requeue code a process can exit with (1-255).
    pub(crate) fn validate_recovery(&self) -> Result<()> {
        let role = &self.name;
        if self.time_limit == Some(0) {
            return Err(Error::spec(format!(
                "role `{role}`: time_limit must be at least 1 second"
            )));
        }
        if let (Some(limit), Some(sig)) = (self.time_limit, self.checkpoint_signal) {
            if sig.seconds >= limit {
                return Err(Error::spec(format!(
                    "role `{role}`: checkpoint_signal {sig} comes {} before the end of an \
                     attempt of {}: give fewer seconds than the time limit",
                    format_duration(sig.seconds),
                    format_duration(limit)
                )));
            }
        }
        if let Some(dir) = &self.checkpoint_dir {
            if dir.is_empty() || dir.contains(['\0', '\n']) {
                return Err(Error::spec(format!(
                    "role `{role}`: checkpoint_dir {dir:?} is not a path"
                )));
            }
        }
        if let Some(code) = self.requeue_exit_code {
            if !(1..=255).contains(&code) {
                return Err(Error::spec(format!(
                    "role `{role}`: requeue_exit_code {code} is not an exit code a process can \
                     ask with (1-255)"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// torchrun gets the checkpoint signal to forward only under recovery, only where it would
    /// not forward it anyway, and never over the role's own choice.
    #[test]
    fn torchrun_forwards_the_checkpoint_signal_under_recovery_only() {
        let forwarded =
            |entrypoint: &str, args: &[&str], setup: &dyn Fn(&mut crate::specs::Role)| {
                let mut r = crate::specs::Role::new("r", "img");
                r.entrypoint = entrypoint.into();
                r.args = args.iter().map(|a| a.to_string()).collect();
                setup(&mut r);
                r.forward_checkpoint_signal_through_torchrun();
                r.env.get(TORCHRUN_SIGNALS_ENV).cloned()
            };
        let limited = |r: &mut crate::specs::Role| r.time_limit = Some(600);
        let all = Some("SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1".to_string());
        assert_eq!(
            forwarded("torchrun", &["--nnodes", "1", "t.py"], &limited),
            all
        );
        assert_eq!(forwarded("/venv/bin/torchrun", &["t.py"], &limited), all);
        assert_eq!(
            forwarded("python", &["-m", "torch.distributed.run", "t.py"], &limited),
            all
        );
        assert_eq!(
            forwarded("sh", &["-c", "cd /w && torchrun t.py"], &limited),
            all
        );
        assert_eq!(
            forwarded("python", &["t.py"], &limited),
            None,
            "not torchrun"
        );
        assert_eq!(
            forwarded("torchrun", &["t.py"], &|_| {}),
            None,
            "no recovery"
        );
        let usr2 = |r: &mut crate::specs::Role| {
            r.checkpoint_signal = Some("USR2@60".parse().unwrap());
        };
        assert_eq!(
            forwarded("torchrun", &["t.py"], &usr2).as_deref(),
            Some("SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2")
        );
        let term = |r: &mut crate::specs::Role| {
            r.checkpoint_signal = Some("TERM@60".parse().unwrap());
        };
        assert_eq!(
            forwarded("torchrun", &["t.py"], &term),
            None,
            "forwarded anyway"
        );
        let own = |r: &mut crate::specs::Role| {
            r.time_limit = Some(600);
            r.env.insert(TORCHRUN_SIGNALS_ENV.into(), "SIGUSR1".into());
        };
        assert_eq!(
            forwarded("torchrun", &["t.py"], &own).as_deref(),
            Some("SIGUSR1")
        );
    }

    /// The default lead fits a short limit (a quarter of it), so the signal never comes as the
    /// job starts; from six minutes on it is USR1@90.
    #[test]
    fn the_default_checkpoint_signal_fits_the_time_limit() {
        let lead = |limit| default_checkpoint_signal(limit).seconds;
        assert_eq!([lead(1), lead(3), lead(20), lead(200)], [0, 0, 5, 50]);
        assert_eq!([lead(360), lead(4 * 3600)], [90, 90]);
        let mut r = crate::specs::Role::new("r", "img");
        r.time_limit = Some(20);
        assert_eq!(
            r.recovery().checkpoint_signal.unwrap().to_string(),
            "USR1@5"
        );
        assert!(r.validate_recovery().is_ok());
    }

    #[test]
    fn container_checkpoint_dirs_must_be_on_a_mount() {
        let mut r = crate::specs::Role::new("r", "img");
        assert_eq!(r.container_checkpoint_dir().unwrap(), None, "no recovery");
        r.time_limit = Some(60);
        let err = r.container_checkpoint_dir().unwrap_err();
        assert!(err.to_string().contains("--checkpoint_dir PATH"), "{err}");
        r.checkpoint_dir = Some("/ckpt/run1".into());
        let err = r.container_checkpoint_dir().unwrap_err();
        assert!(err.to_string().contains("it has none"), "{err}");
        r.mounts = vec![crate::specs::Mount::Volume {
            src: "pvc".into(),
            dst_path: "/ckpt".into(),
            read_only: false,
        }];
        assert_eq!(
            r.container_checkpoint_dir().unwrap().as_deref(),
            Some("/ckpt/run1")
        );
        r.checkpoint_dir = Some("/ckptx".into());
        let err = r.container_checkpoint_dir().unwrap_err();
        assert!(err.to_string().contains("(/ckpt)"), "{err}");
    }

    #[test]
    fn durations() {
        for (text, secs) in [
            ("90", 90),
            ("90s", 90),
            ("30m", 1800),
            ("4h", 14400),
            ("1d2h", 93600),
            ("1h30m5s", 5405),
            (" 2d ", 172800),
        ] {
            assert_eq!(parse_duration(text).unwrap(), secs, "{text}");
        }
        for bad in ["", "h", "4x", "1.5h", "-3", "4h3", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        for secs in [0, 59, 60, 3600, 5405, 93600] {
            assert_eq!(parse_duration(&format_duration(secs)).unwrap(), secs);
        }
        assert_eq!(format_duration(93600), "1d2h");
    }

    #[test]
    fn checkpoint_signals() {
        let s: CheckpointSignal = "USR1@90".parse().unwrap();
        assert_eq!(s, DEFAULT_CHECKPOINT_SIGNAL);
        assert_eq!(s.to_string(), "USR1@90");
        let s: CheckpointSignal = "sigterm@2m".parse().unwrap();
        assert_eq!((s.signal, s.seconds), (Signal::Term, 120));
        assert_eq!(Signal::Usr1.number(), libc::SIGUSR1);
        for bad in ["USR1", "KILL@10", "USR1@x", "@90"] {
            let e = bad.parse::<CheckpointSignal>().unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{bad}");
        }
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "\"TERM@120\"");
        assert_eq!(serde_json::from_str::<CheckpointSignal>(&json).unwrap(), s);
    }
}
