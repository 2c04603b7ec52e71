//! Parsing a component's command-line style arguments (`--lr 0.1 --flag -- script args`) as
//! TorchX's argparse does: unambiguous prefixes, `--k=v`, bare booleans, varargs after `--`.

use std::collections::BTreeMap;

use super::{parse_kv, parse_list, ArgValue, Component, ComponentArgs, Param, ParamDefault};
use super::{ParamType, ParseOutcome};
use crate::error::Result;

/// The tokens as given: each flag's raw value, and the varargs.
#[derive(Default)]
struct Given {
    raw: BTreeMap<String, String>,
    varargs: Vec<String>,
}

impl Component {
    /// Parses command-line style arguments. `defaults` (from `[component:<name>]`) override the
    /// declared defaults.
    pub fn parse_args<S: AsRef<str>>(
        &self,
        tokens: &[S],
        defaults: &BTreeMap<String, String>,
    ) -> Result<ParseOutcome> {
        let tokens: Vec<&str> = tokens.iter().map(AsRef::as_ref).collect();
        self.check_defaults(defaults)?;
        match self.scan(&tokens)? {
            None => Ok(ParseOutcome::Help),
            Some(given) => Ok(ParseOutcome::Args(self.assemble(given, defaults)?)),
        }
    }

    /// `[component:<name>]` may only set declared parameters.
    fn check_defaults(&self, defaults: &BTreeMap<String, String>) -> Result<()> {
        match defaults
            .keys()
            .find(|key| self.params.iter().all(|p| &p.name != *key))
        {
            None => Ok(()),
            Some(key) => Err(self
                .err(format!(
                    "[component:{}] in .torchxconfig sets unknown parameter `{key}`. Valid \
                     parameters: {}",
                    self.name,
                    self.param_names()
                ))
                .suggesting(key, self.params.iter().map(|p| p.name.as_str()))),
        }
    }

    /// The flags and varargs of `tokens`; `None` for `--help`.
    fn scan(&self, tokens: &[&str]) -> Result<Option<Given>> {
        let mut given = Given::default();
        let mut i = 0;
        while i < tokens.len() {
            let tok = tokens[i];
            if tok == "--help" {
                return Ok(None);
            }
            if tok == "--" || !tok.starts_with('-') || tok == "-" {
                let start = if tok == "--" { i + 1 } else { i };
                if self.varargs().is_none() {
                    let extra = tokens[start..].join(" ");
                    if extra.is_empty() {
                        break;
                    }
                    return Err(self.err(format!(
                        "unexpected argument(s) `{extra}`; it takes only --options ({})",
                        self.param_names()
                    )));
                }
                given.varargs = tokens[start..].iter().map(|s| s.to_string()).collect();
                break;
            }
            let stripped = tok.strip_prefix("--").unwrap_or_else(|| &tok[1..]);
            let (flag, inline) = match stripped.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (stripped, None),
            };
            let param = self.flag_param(tok, flag)?;
            if given.raw.contains_key(&param.name) {
                return Err(self.err(format!(
                    "parameter `--{}` is given more than once",
                    param.name
                )));
            }
            let value = match inline {
                Some(v) => v,
                None if param.ty == ParamType::Bool
                    && tokens.get(i + 1).is_none_or(|n| n.starts_with('-')) =>
                {
                    "True".into()
                }
                None => {
                    i += 1;
                    tokens.get(i).map(|s| s.to_string()).ok_or_else(|| {
                        self.err(format!("`{tok}` expects a value ({})", param.ty.name()))
                    })?
                }
            };
            given.raw.insert(param.name.clone(), value);
            i += 1;
        }
        Ok(Some(given))
    }

    /// The parameter `flag` (from the token `tok`) names: exactly, or, as TorchX's argparse, as
    /// an unambiguous prefix of a long option.
    fn flag_param(&self, tok: &str, flag: &str) -> Result<&Param> {
        let single_dash = !tok.starts_with("--");
        if let Some(p) = self
            .param(flag)
            .filter(|p| !single_dash || p.name.chars().count() == 1)
        {
            return Ok(p);
        }
        let matches: Vec<&Param> = if single_dash || flag.is_empty() {
            Vec::new()
        } else {
            self.params
                .iter()
                .filter(|p| p.ty != ParamType::VarArgs && p.name.starts_with(flag))
                .collect()
        };
        match matches.as_slice() {
            [one] => Ok(one),
            [] => Err(self
                .err(format!(
                    "unknown argument `{tok}`. Valid parameters: {}",
                    self.param_names()
                ))
                .suggesting(
                    flag,
                    self.params
                        .iter()
                        .filter(|p| p.ty != ParamType::VarArgs)
                        .map(|p| p.name.as_str()),
                )),
            many => Err(self.err(format!(
                "ambiguous option: --{flag} could match {}",
                many.iter()
                    .map(|p| format!("--{}", p.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Every parameter's value: given, else from `defaults`, else declared; required ones
    /// must have one.
    fn assemble(
        &self,
        mut given: Given,
        defaults: &BTreeMap<String, String>,
    ) -> Result<ComponentArgs> {
        let mut args = ComponentArgs::default();
        for p in &self.params {
            if p.ty == ParamType::VarArgs {
                if given.varargs.is_empty() {
                    if let Some(d) = defaults.get(&p.name) {
                        given.varargs = d.split_whitespace().map(str::to_string).collect();
                    } else if let ParamDefault::Value(d) = &p.default {
                        given.varargs = d.split_whitespace().map(str::to_string).collect();
                    }
                }
                continue;
            }
            let value = match given
                .raw
                .remove(&p.name)
                .or_else(|| defaults.get(&p.name).cloned())
            {
                Some(v) => v,
                None => match &p.default {
                    ParamDefault::Value(v) => v.clone(),
                    ParamDefault::Absent => continue,
                    ParamDefault::Required => {
                        return Err(self.err(format!(
                            "missing required parameter `--{}` ({})",
                            p.name, p.help
                        )));
                    }
                },
            };
            args.values.insert(p.name.clone(), self.decode(p, &value)?);
        }
        args.varargs = given.varargs;
        args.declared = self.params.iter().map(|p| (p.name.clone(), p.ty)).collect();
        Ok(args)
    }

    fn decode(&self, p: &Param, value: &str) -> Result<ArgValue> {
        let bad = |what: &str| self.err(format!("`--{}` expects {what}, got `{value}`", p.name));
        Ok(match p.ty {
            ParamType::Str | ParamType::VarArgs => ArgValue::Str(value.to_string()),
            ParamType::Int => ArgValue::Int(value.trim().parse().map_err(|_| bad("an integer"))?),
            ParamType::Float => ArgValue::Float(value.trim().parse().map_err(|_| bad("a number"))?),
            ParamType::Bool => match value.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => ArgValue::Bool(true),
                "false" | "0" | "no" | "off" => ArgValue::Bool(false),
                _ => return Err(bad("True or False")),
            },
            ParamType::List => ArgValue::List(parse_list(value)),
            ParamType::Dict => ArgValue::Dict(
                parse_kv(value)
                    .map_err(|e| self.err(format!("`--{}`: {e} (expected K1=V1,K2=V2)", p.name)))?
                    .into_iter()
                    .collect(),
            ),
        })
    }

    pub(super) fn param_names(&self) -> String {
        self.params
            .iter()
            .map(|p| {
                if p.ty == ParamType::VarArgs {
                    format!("[{}...]", p.name)
                } else {
                    format!("--{}", p.name)
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
