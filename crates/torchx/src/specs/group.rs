//! Arrays and sweeps: the tasks of a group and each task's parameters (pure; the groups
//! themselves, their handles and submission are built on this).
//!
//! - An array is `N` (indexes 0..N-1) or `A-B[:STEP]` (Slurm's syntax), with an optional
//!   `%K` cap on how many tasks run at once (`0-99%8`).
//! - A sweep is the grid (cartesian product) of `KEY=V1,V2,...` specs, or the points of a file:
//!   JSON lines (one object per line) or CSV with a header.
//! - A task's arguments and env may say `${array_index}` and `${sweep.KEY}`; its environment
//!   gets `TORCHX_ARRAY_INDEX`, `TORCHX_ARRAY_SIZE` and `TORCHX_SWEEP_<KEY>`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The most tasks one group may have.
pub const MAX_TASKS: usize = 100_000;

/// An `--array` spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArraySpec {
    /// The task indexes, ascending.
    pub indexes: Vec<u32>,
    /// How many tasks may run at once (`%K`).
    pub max_concurrent: Option<u32>,
}

impl FromStr for ArraySpec {
    type Err = Error;

    /// `N`, `A-B`, `A-B:STEP`, each with an optional `%K`.
    fn from_str(s: &str) -> Result<ArraySpec> {
        let bad = |why: &str| {
            Error::arg(format!(
                "--array `{s}`: {why} (give N, A-B or A-B:STEP, optionally with %K: 10, 0-99, \
                 1-9:2, 0-99%8)"
            ))
        };
        let (range, cap) = match s.trim().split_once('%') {
            Some((r, k)) => (r, Some(k)),
            None => (s.trim(), None),
        };
        let number = |t: &str, what: &str| -> Result<u32> {
            t.trim()
                .parse::<u32>()
                .map_err(|_| bad(&format!("{what} `{t}` is not a whole number")))
        };
        let max_concurrent = cap
            .map(|k| number(k, "the cap"))
            .transpose()?
            .map(|k| {
                if k == 0 {
                    Err(bad("the cap %0 would run nothing"))
                } else {
                    Ok(k)
                }
            })
            .transpose()?;
        let indexes: Vec<u32> = match range.split_once('-') {
            None => {
                let n = number(range, "the size")?;
                if n == 0 {
                    return Err(bad("an array of 0 tasks"));
                }
                if n as usize > MAX_TASKS {
                    return Err(bad(&format!("more than {MAX_TASKS} tasks")));
                }
                (0..n).collect()
            }
            Some((a, rest)) => {
                let (b, step) = match rest.split_once(':') {
                    Some((b, step)) => (b, number(step, "the step")?),
                    None => (rest, 1),
                };
                let (a, b) = (number(a, "the first index")?, number(b, "the last index")?);
                if step == 0 {
                    return Err(bad("a step of 0"));
                }
                if a > b {
                    return Err(bad(&format!("the first index {a} is after the last {b}")));
                }
                if ((b - a) / step) as usize >= MAX_TASKS {
                    return Err(bad(&format!("more than {MAX_TASKS} tasks")));
                }
                (a..=b).step_by(step as usize).collect()
            }
        };
        Ok(ArraySpec {
            indexes,
            max_concurrent,
        })
    }
}

impl fmt::Display for ArraySpec {
    /// Slurm's `--array` syntax for these indexes: `A-B[:STEP][%K]` where they are evenly
    /// spaced, else a comma list.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ix = &self.indexes;
        let step = match ix.as_slice() {
            [a, b, ..] => b - a,
            _ => 1,
        };
        let even = ix.windows(2).all(|w| w[1] - w[0] == step);
        match (ix.first(), ix.last()) {
            (Some(a), Some(b)) if even && a != b && step > 1 => write!(f, "{a}-{b}:{step}")?,
            (Some(a), Some(b)) if even && a != b => write!(f, "{a}-{b}")?,
            (Some(a), Some(_)) if ix.len() == 1 => write!(f, "{a}")?,
            _ => {
                // Runs of consecutive indexes as ranges: `0-3,7,9-12`.
                let mut runs: Vec<String> = Vec::new();
                let mut i = 0;
                while i < ix.len() {
                    let mut j = i;
                    while j + 1 < ix.len() && ix[j + 1] == ix[j] + 1 {
                        j += 1;
                    }
                    runs.push(if i == j {
                        ix[i].to_string()
                    } else {
                        format!("{}-{}", ix[i], ix[j])
                    });
                    i = j + 1;
                }
                f.write_str(&runs.join(","))?;
            }
        }
        match self.max_concurrent {
            Some(k) => write!(f, "%{k}"),
            None => Ok(()),
        }
    }
}

/// One point of a sweep: parameter name → value.
pub type Point = BTreeMap<String, String>;

fn check_key(key: &str, whence: &str) -> Result<()> {
    let mut chars = key.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::arg(format!(
            "{whence}: parameter name `{key}` is not a name (letters, digits and `_`, not \
             starting with a digit)"
        )))
    }
}

/// The grid of `--sweep KEY=V1,V2,...` specs: every combination, the first key varying
/// slowest.
pub fn sweep_grid(specs: &[String]) -> Result<Vec<Point>> {
    let mut points: Vec<Point> = vec![Point::new()];
    let mut seen = Vec::new();
    for spec in specs {
        let whence = format!("--sweep `{spec}`");
        let (key, values) = spec.split_once('=').ok_or_else(|| {
            Error::arg(format!(
                "{whence}: expected KEY=V1,V2,... (e.g. lr=0.1,0.01)"
            ))
        })?;
        let key = key.trim();
        check_key(key, &whence)?;
        if seen.contains(&key) {
            return Err(Error::arg(format!("{whence}: `{key}` is swept twice")));
        }
        seen.push(key);
        let values: Vec<&str> = values.split(',').collect();
        if points.len().saturating_mul(values.len()) > MAX_TASKS {
            return Err(Error::arg(format!(
                "{whence}: the grid would have more than {MAX_TASKS} points"
            )));
        }
        points = points
            .iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.insert(key.to_string(), (*v).to_string());
                    p
                })
            })
            .collect();
    }
    Ok(points)
}

/// The points of a `--sweep_file`: JSON lines (each an object of scalars) or CSV with a header
/// (`"` quotes a field that holds `,` or `"`, doubled inside). Blank lines are skipped.
pub fn sweep_file(name: &str, text: &str) -> Result<Vec<Point>> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
        .collect();
    let Some(&(_, first)) = lines.first() else {
        return Err(Error::arg(format!("--sweep_file {name}: no points in it")));
    };
    let at = |line: usize, why: String| Error::arg(format!("--sweep_file {name}:{line}: {why}"));
    let points: Vec<Point> = if first.trim_start().starts_with('{') {
        lines
            .iter()
            .map(|&(n, l)| {
                let v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(l)
                    .map_err(|e| at(n, format!("not a JSON object: {e}")))?;
                v.into_iter()
                    .map(|(k, v)| {
                        check_key(&k, &format!("--sweep_file {name}:{n}"))?;
                        let v = match v {
                            serde_json::Value::String(s) => s,
                            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => {
                                v.to_string()
                            }
                            other => return Err(at(n, format!("`{k}` is {other}, not a scalar"))),
                        };
                        Ok((k, v))
                    })
                    .collect()
            })
            .collect::<Result<_>>()?
    } else {
        let header = csv_fields(first).map_err(|e| at(lines[0].0, e))?;
        for k in &header {
            check_key(k, &format!("--sweep_file {name}:{}", lines[0].0))?;
        }
        lines[1..]
            .iter()
            .map(|&(n, l)| {
                let fields = csv_fields(l).map_err(|e| at(n, e))?;
                if fields.len() != header.len() {
                    return Err(at(
                        n,
                        format!("{} fields, the header has {}", fields.len(), header.len()),
                    ));
                }
                Ok(header.iter().cloned().zip(fields).collect())
            })
            .collect::<Result<_>>()?
    };
    if points.is_empty() {
        return Err(Error::arg(format!("--sweep_file {name}: no points in it")));
    }
    if points.len() > MAX_TASKS {
        return Err(Error::arg(format!(
            "--sweep_file {name}: more than {MAX_TASKS} points"
        )));
    }
    Ok(points)
}

/// The fields of one CSV line.
fn csv_fields(line: &str) -> std::result::Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() && !was_quoted => {
                quoted = true;
                was_quoted = true;
            }
            (false, ',') => {
                fields.push(std::mem::take(&mut field));
                was_quoted = false;
            }
            (false, '"') => return Err("a quote inside an unquoted field".into()),
            (false, c) => field.push(c),
        }
    }
    if quoted {
        return Err("an unterminated quoted field".into());
    }
    fields.push(field);
    Ok(fields)
}

/// One task of a group.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// Its index (`${array_index}`, `TORCHX_ARRAY_INDEX`).
    pub index: u32,
    /// Its sweep point (empty for a plain array).
    pub params: Point,
}

/// The tasks of an array or of a sweep's points (indexed 0..); not both.
pub fn tasks(array: Option<&ArraySpec>, points: Option<Vec<Point>>) -> Result<Vec<Task>> {
    match (array, points) {
        (Some(_), Some(_)) => Err(Error::arg(
            "--array and --sweep/--sweep_file: give one (a sweep is an array of its points; \
             cap it with --max_concurrent)",
        )),
        (Some(a), None) => Ok(a
            .indexes
            .iter()
            .map(|&index| Task {
                index,
                params: Point::new(),
            })
            .collect()),
        (None, Some(points)) => Ok((0u32..)
            .zip(points)
            .map(|(index, params)| Task { index, params })
            .collect()),
        (None, None) => Ok(Vec::new()),
    }
}

impl Task {
    /// `s` with `${array_index}` and `${sweep.KEY}` replaced; anything else is left as is (an
    /// unknown key too, for the later macro pass or the shell).
    pub fn substitute(&self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let value = after.find('}').and_then(|end| {
                let name = &after[..end];
                let v = match name.strip_prefix("sweep.") {
                    Some(key) => self.params.get(key).cloned(),
                    None if name == "array_index" => Some(self.index.to_string()),
                    None => None,
                };
                v.map(|v| (v, end))
            });
            match value {
                Some((v, end)) => {
                    out.push_str(&v);
                    rest = &after[end + 1..];
                }
                None => {
                    out.push_str("${");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The variables every replica of this task gets, in a group of `size` tasks.
    pub fn env(&self, size: usize) -> crate::specs::Env {
        let mut env = crate::specs::Env::new();
        env.insert("TORCHX_ARRAY_INDEX".into(), self.index.to_string());
        env.insert("TORCHX_ARRAY_SIZE".into(), size.to_string());
        for (k, v) in &self.params {
            env.insert(
                format!("TORCHX_SWEEP_{}", k.to_ascii_uppercase()),
                v.clone(),
            );
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> ArraySpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn array_specs() {
        assert_eq!(spec("3").indexes, [0, 1, 2]);
        assert_eq!(spec("2-5").indexes, [2, 3, 4, 5]);
        assert_eq!(spec("1-9:3").indexes, [1, 4, 7]);
        assert_eq!(spec("0-99%8").max_concurrent, Some(8));
        assert_eq!(spec("0-99%8").indexes.len(), 100);
        for (s, shown) in [
            ("3", "0-2"),
            ("1-9:3", "1-7:3"),
            ("0-99%8", "0-99%8"),
            ("5-5", "5"),
        ] {
            assert_eq!(spec(s).to_string(), shown, "{s}");
        }
        // A rerun's scattered indexes: runs become ranges.
        let scattered = ArraySpec {
            indexes: vec![0, 1, 2, 3, 7, 9, 10, 12],
            max_concurrent: Some(2),
        };
        assert_eq!(scattered.to_string(), "0-3,7,9-10,12%2");
        for (bad, why) in [
            ("0", "0 tasks"),
            ("x", "`x` is not a whole number"),
            ("5-2", "after the last"),
            ("1-9:0", "step of 0"),
            ("4%0", "%0"),
            ("0-4294967295", "more than"),
            ("-3", "first index ``"),
        ] {
            let err = bad.parse::<ArraySpec>().unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(err.contains("give N, A-B"), "{bad}: {err}");
        }
    }

    #[test]
    fn sweep_grids_are_cartesian() {
        let g = sweep_grid(&["lr=0.1,0.01".into(), "bs=32,64,128".into()]).unwrap();
        assert_eq!(g.len(), 6);
        assert_eq!(g[0]["lr"], "0.1");
        assert_eq!(g[0]["bs"], "32");
        assert_eq!(g[5]["lr"], "0.01");
        assert_eq!(g[5]["bs"], "128");
        for (bad, why) in [
            (vec!["lr"], "expected KEY=V1"),
            (vec!["1x=2"], "not a name"),
            (vec!["a=1", "a=2"], "swept twice"),
        ] {
            let specs: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            let err = sweep_grid(&specs).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn sweep_files_json_lines_and_csv() {
        let j = sweep_file(
            "p.jsonl",
            "{\"lr\": 0.1, \"name\": \"a\"}\n\n{\"lr\": 1e-3, \"name\": \"b\"}\n",
        )
        .unwrap();
        assert_eq!((j[0]["lr"].as_str(), j[1]["name"].as_str()), ("0.1", "b"));
        let c = sweep_file("p.csv", "lr,tag\n0.1,\"a,b\"\n0.2,\"say \"\"hi\"\"\"\n").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0]["tag"], "a,b");
        assert_eq!(c[1]["tag"], "say \"hi\"");
        for (text, why) in [
            ("", "no points"),
            ("lr\n", "no points"),
            ("lr,bs\n1\n", "p:2: 1 fields, the header has 2"),
            ("{\"a\": [1]}\n", "not a scalar"),
            ("a b\n1\n", "not a name"),
            ("lr\n\"x\n", "unterminated"),
        ] {
            let err = sweep_file("p", text).unwrap_err().to_string();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn tasks_substitute_and_export_their_parameters() {
        let points = sweep_grid(&["lr=0.1,0.2".into()]).unwrap();
        let t = tasks(None, Some(points)).unwrap();
        assert_eq!(t[1].index, 1);
        assert_eq!(
            t[1].substitute("--lr ${sweep.lr} --i ${array_index} ${sweep.nope} ${HOME} $x ${"),
            "--lr 0.2 --i 1 ${sweep.nope} ${HOME} $x ${"
        );
        let env = t[1].env(2);
        assert_eq!(env["TORCHX_ARRAY_INDEX"], "1");
        assert_eq!(env["TORCHX_ARRAY_SIZE"], "2");
        assert_eq!(env["TORCHX_SWEEP_LR"], "0.2");
        let a = spec("1-5:2");
        let t = tasks(Some(&a), None).unwrap();
        assert_eq!(t.iter().map(|t| t.index).collect::<Vec<_>>(), [1, 3, 5]);
        assert!(tasks(Some(&a), Some(vec![Point::new()])).is_err());
    }
}
