//! Macros (`${app_id}`, `${replica_id}`, `${img_root}`, `${rank0_env}`) with the exact semantics
//! of Python's `string.Template.safe_substitute`: `$name` and `${name}` are replaced, unknown names
//! are left intact, and `$$` collapses to `$`.

use serde_json::Value;

use super::Role;

/// The values a scheduler substitutes into each replica's role.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MacroValues {
    /// `${img_root}`: where the image is unpacked (the cwd for local_cwd).
    pub img_root: String,
    /// `${app_id}`.
    pub app_id: String,
    /// `${replica_id}`: the replica index within its role.
    pub replica_id: String,
    /// `${rank0_env}`: the NAME of the env var holding rank 0's host.
    pub rank0_env: String,
}

impl MacroValues {
    fn lookup(&self, name: &str) -> Option<&str> {
        match name {
            "img_root" => Some(&self.img_root),
            "app_id" => Some(&self.app_id),
            "replica_id" => Some(&self.replica_id),
            "rank0_env" => Some(&self.rank0_env),
            "base_img_root" => Some("DEPRECATED"),
            _ => None,
        }
    }

    /// Substitutes the macros in `s`.
    pub fn substitute(&self, s: &str) -> String {
        substitute(s, |name| self.lookup(name).map(str::to_string))
    }

    /// A copy of `role` with macros substituted in args, env values and (string leaves of)
    /// metadata. Image, entrypoint and names are left alone, as in TorchX.
    pub fn apply(&self, role: &Role) -> Role {
        let mut role = role.clone();
        for a in &mut role.args {
            *a = self.substitute(a);
        }
        for v in role.env.values_mut() {
            *v = self.substitute(v);
        }
        for v in role.metadata.values_mut() {
            self.apply_value(v);
        }
        role
    }

    fn apply_value(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.substitute(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.apply_value(i)),
            Value::Object(map) => map.values_mut().for_each(|i| self.apply_value(i)),
            _ => {}
        }
    }
}

fn is_ident_start(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphabetic()
}
fn is_ident(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphanumeric()
}

/// `string.Template(s).safe_substitute(...)` with `lookup` giving the value of a known name.
pub fn substitute(s: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut last = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        out.push_str(&s[last..i]);
        let rest = &bytes[i + 1..];
        if rest.first() == Some(&b'$') {
            out.push('$');
            i += 2;
        } else if rest.first() == Some(&b'{') {
            let len = rest[1..].iter().take_while(|c| is_ident(**c)).count();
            let closed = rest.get(1 + len) == Some(&b'}');
            if len > 0 && is_ident_start(rest[1]) && closed {
                let name = &s[i + 2..i + 2 + len];
                match lookup(name) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&s[i..i + 3 + len]),
                }
                i += 3 + len;
            } else {
                out.push('$');
                i += 1;
            }
        } else if rest.first().is_some_and(|c| is_ident_start(*c)) {
            let len = rest.iter().take_while(|c| is_ident(**c)).count();
            let name = &s[i + 1..i + 1 + len];
            match lookup(name) {
                Some(v) => out.push_str(&v),
                None => out.push_str(&s[i..i + 1 + len]),
            }
            i += 1 + len;
        } else {
            out.push('$');
            i += 1;
        }
        last = i;
    }
    out.push_str(&s[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> MacroValues {
        MacroValues {
            img_root: "/img".into(),
            app_id: "app-123".into(),
            replica_id: "2".into(),
            rank0_env: "TORCHX_RANK0_HOST".into(),
        }
    }

    #[test]
    fn template_semantics() {
        let v = values();
        let cases = [
            ("${app_id}", "app-123"),
            ("$app_id", "app-123"),
            ("$app_idx", "$app_idx"),
            ("${unknown} $unknown", "${unknown} $unknown"),
            ("$$", "$"),
            ("$${app_id}", "${app_id}"),
            ("$$$app_id", "$app-123"),
            ("a$", "a$"),
            ("$1 ${ app_id} ${app_id", "$1 ${ app_id} ${app_id"),
            ("${img_root}/bin:${replica_id}", "/img/bin:2"),
            (
                "$${${rank0_env}:=localhost}:29500",
                "${TORCHX_RANK0_HOST:=localhost}:29500",
            ),
            ("${base_img_root}", "DEPRECATED"),
            ("héllo ${app_id} ünï", "héllo app-123 ünï"),
        ];
        for (input, want) in cases {
            assert_eq!(v.substitute(input), want, "input {input:?}");
        }
    }

    #[test]
    fn apply_touches_args_env_values_and_metadata_only() {
        let mut role = Role::new("r-${app_id}", "${img_root}").with_entrypoint("${app_id}");
        role.args = vec!["--id".into(), "${app_id}".into()];
        role.env.insert("${app_id}".into(), "$replica_id".into());
        role.metadata.insert(
            "k".into(),
            serde_json::json!({"a": ["${app_id}", 1], "b": "$$"}),
        );
        let out = values().apply(&role);
        assert_eq!(out.name, "r-${app_id}");
        assert_eq!(out.image, "${img_root}");
        assert_eq!(out.entrypoint, "${app_id}");
        assert_eq!(out.args, vec!["--id", "app-123"]);
        assert_eq!(out.env["${app_id}"], "2");
        assert_eq!(
            out.metadata["k"],
            serde_json::json!({"a": ["app-123", 1], "b": "$"})
        );
    }
}
