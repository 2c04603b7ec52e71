//! TorchX's `key=value` grammar (`torchx.util.types.to_dict`), used by `-cfg`, `--env` and dict
//! component parameters.

use crate::error::{Error, Result};

/// Parses `k=v,k2=v2` into ordered pairs with TorchX's rules: the last `,` or `;` before a `=`
/// separates pairs (so `FOO=v1,v2,BAR=v3` gives `FOO=v1,v2`), values in `'…'`/`"…"` may contain
/// `= , ;`, and `''`/`""` is the empty string. An empty input gives no pairs.
pub fn parse_kv(arg: &str) -> Result<Vec<(String, String)>> {
    if arg.is_empty() {
        return Ok(Vec::new());
    }
    let (processed, quoted) = extract_quoted(arg);
    let restore = |s: &str| -> String {
        let mut out = s.to_string();
        for (i, q) in quoted.iter().enumerate() {
            out = out.replace(&placeholder(i), q);
        }
        out
    };
    let chunks: Vec<&str> = processed
        .split('=')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if chunks.len() < 2 {
        return Err(Error::arg(format!(
            "`{arg}` does not have at least one `key=value` pair"
        )));
    }
    let mut pairs = Vec::new();
    let mut key = restore(chunks[0]);
    for vk in &chunks[1..chunks.len() - 1] {
        let idx = vk.rfind([',', ';']);
        let Some(idx) = idx.filter(|i| *i != 0 && *i + 1 != vk.len()) else {
            return Err(Error::arg(format!(
                "`{}` in `{arg}` cannot be split into `value<delim>key` with delims `,` or `;`",
                restore(vk)
            )));
        };
        pairs.push((key, unquote(&restore(vk[..idx].trim()))));
        key = restore(vk[idx + 1..].trim());
    }
    pairs.push((key, unquote(&restore(chunks[chunks.len() - 1]))));
    Ok(pairs)
}

fn placeholder(i: usize) -> String {
    format!("\u{1}Q{i}\u{1}")
}

/// Replaces each quoted substring (a quote, non-quote or escaped chars, the same quote) with a
/// placeholder, as TorchX's `re.sub(r'([\'"])((?:\\.|(?!\1).)*?)\1', ...)` does.
fn extract_quoted(arg: &str) -> (String, Vec<String>) {
    let chars: Vec<char> = arg.chars().collect();
    let mut out = String::new();
    let mut quoted = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            let mut j = i + 1;
            let mut closed = None;
            while j < chars.len() {
                if chars[j] == '\\' && j + 1 < chars.len() && chars[j + 1] != '\n' {
                    j += 2;
                    continue;
                }
                if chars[j] == c {
                    closed = Some(j);
                    break;
                }
                if chars[j] == '\n' {
                    break;
                }
                j += 1;
            }
            if let Some(end) = closed {
                quoted.push(chars[i..=end].iter().collect());
                out.push_str(&placeholder(quoted.len() - 1));
                i = end + 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    (out, quoted)
}

fn unquote(val: &str) -> String {
    let quoted = val.len() >= 2
        && ((val.starts_with('\'') && val.ends_with('\''))
            || (val.starts_with('"') && val.ends_with('"')));
    if quoted {
        val[1..val.len() - 1].to_string()
    } else {
        val.to_string()
    }
}

/// TorchX's `to_list`: split on `,`, strip, drop empties.
pub fn parse_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Vec<(String, String)> {
        parse_kv(s).unwrap()
    }
    fn p(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn torchx_to_dict_cases() {
        assert_eq!(d(""), vec![]);
        assert_eq!(d("FOO=v1"), p(&[("FOO", "v1")]));
        assert_eq!(d("FOO=v1,v2"), p(&[("FOO", "v1,v2")]));
        assert_eq!(d("FOO=v1;v2"), p(&[("FOO", "v1;v2")]));
        assert_eq!(d("FOO=''"), p(&[("FOO", "")]));
        assert_eq!(d("FOO=\"\""), p(&[("FOO", "")]));
        assert_eq!(d("FOO=,"), p(&[("FOO", ",")]));
        assert_eq!(d("FOO=;"), p(&[("FOO", ";")]));
        assert_eq!(d("FOO=v1,v2,"), p(&[("FOO", "v1,v2,")]));
        assert_eq!(d("FOO=v1,v2;"), p(&[("FOO", "v1,v2;")]));
        assert_eq!(d("FOO=v1;v2;"), p(&[("FOO", "v1;v2;")]));
        assert_eq!(d("FOO=v1;v2,"), p(&[("FOO", "v1;v2,")]));
        assert_eq!(d("FOO=v1,v2,BAR=v3"), p(&[("FOO", "v1,v2"), ("BAR", "v3")]));
        assert_eq!(d("FOO=v1;v2;BAR=v3"), p(&[("FOO", "v1;v2"), ("BAR", "v3")]));
        assert_eq!(d("FOO=v1,v2;BAR=v3"), p(&[("FOO", "v1,v2"), ("BAR", "v3")]));
        assert_eq!(d("FOO=v1;v2,BAR=v3"), p(&[("FOO", "v1;v2"), ("BAR", "v3")]));
        assert_eq!(
            d("foo=bar1,bar2,bar3,my_key=my_value,new_foo=new_bar1,new_bar2"),
            p(&[
                ("foo", "bar1,bar2,bar3"),
                ("my_key", "my_value"),
                ("new_foo", "new_bar1,new_bar2")
            ])
        );
        assert_eq!(
            d("key1=value1,,foo=bar"),
            p(&[("key1", "value1,"), ("foo", "bar")])
        );
        assert_eq!(d("A=1,,B=2"), p(&[("A", "1,"), ("B", "2")]));
        assert_eq!(
            d("FOO=\"value with = and , and ;\""),
            p(&[("FOO", "value with = and , and ;")])
        );
        assert_eq!(d("a='x=1',b=\"y;z\""), p(&[("a", "x=1"), ("b", "y;z")]));
        assert_eq!(d(" a = 1 , b = 2 "), p(&[("a", "1"), ("b", "2")]));
    }

    #[test]
    fn malformed() {
        for bad in [
            "FOO",
            "FOO,",
            "FOO;",
            "FOO=",
            "A=",
            "FOO=;BAR=v1",
            "=v",
            "a=1=2,=3",
        ] {
            assert!(parse_kv(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_kv("A=").unwrap_err().to_string(),
            "`A=` does not have at least one `key=value` pair"
        );
    }

    #[test]
    fn lists() {
        assert_eq!(parse_list(""), Vec::<String>::new());
        assert_eq!(parse_list(" a, b ,,c"), vec!["a", "b", "c"]);
    }
}
