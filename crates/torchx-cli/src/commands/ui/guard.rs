//! Who may talk to the dashboard: every request carries the server's token (in the URL once,
//! then in a cookie named after the server's port, or in the `X-Torchx-Token` header), names
//! this server in its `Host` header (DNS rebinding), and, when it changes something, is a POST
//! from this page (the token in the header, which a cross-site form cannot set, and no foreign
//! `Origin`). The decision is a pure function of the request's parts; the middleware only
//! applies it.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The header a page sends its token in (mutations must).
pub const TOKEN_HEADER: &str = "x-torchx-token";

/// What the guard knows about its server.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The secret every request must show.
    pub token: String,
    /// The host names (or addresses) the `Host` header may name, without the port.
    pub hosts: Vec<String>,
    /// The port the server listens on; the `Host` header must name it.
    pub port: u16,
    /// Listening on every address: the `Host` header may also name any IP address (a name
    /// that is an address cannot be rebound to another host).
    pub any_address: bool,
}

/// The guard's verdict on one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Pass,
    /// Serve it, and set the cookie (the token came in the URL): the page then redirects to
    /// the same path without the token.
    PassSettingCookie,
    /// Refuse it with this status and reason.
    Refuse(StatusCode, &'static str),
}

/// The parts of a request the guard looks at.
#[derive(Debug, Default)]
pub struct Presented<'a> {
    pub method: &'a str,
    pub host: Option<&'a str>,
    pub query_token: Option<&'a str>,
    pub cookie_token: Option<&'a str>,
    pub header_token: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub fetch_site: Option<&'a str>,
}

impl Guard {
    /// The cookie's name: one per server (port), so two dashboards on one host do not
    /// overwrite each other's token.
    pub fn cookie_name(&self) -> String {
        format!("torchx_ui_{}", self.port)
    }

    fn host_ok(&self, host: &str) -> bool {
        let Some((name, port)) = host.rsplit_once(':') else {
            return false;
        };
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        port.parse() == Ok(self.port)
            && (self.hosts.iter().any(|h| h.eq_ignore_ascii_case(bare))
                || (self.any_address && bare.parse::<std::net::IpAddr>().is_ok()))
    }

    fn token_is(&self, given: &str) -> bool {
        constant_time_eq(given.as_bytes(), self.token.as_bytes())
    }

    /// The verdict on a request.
    pub fn judge(&self, p: &Presented<'_>) -> Verdict {
        if !p.host.is_some_and(|h| self.host_ok(h)) {
            return Verdict::Refuse(
                StatusCode::FORBIDDEN,
                "the Host header does not name this server",
            );
        }
        let mutation = match p.method {
            "GET" | "HEAD" => false,
            "POST" => true,
            _ => return Verdict::Refuse(StatusCode::METHOD_NOT_ALLOWED, "only GET and POST"),
        };
        if mutation {
            // A cookie alone is what a cross-site form would send: a change needs the header.
            return match p.header_token {
                None => Verdict::Refuse(
                    StatusCode::UNAUTHORIZED,
                    "a change needs the X-Torchx-Token header",
                ),
                Some(t) if !self.token_is(t) => {
                    Verdict::Refuse(StatusCode::FORBIDDEN, "wrong token")
                }
                Some(_) if !self.same_origin(p) => {
                    Verdict::Refuse(StatusCode::FORBIDDEN, "a cross-origin request")
                }
                Some(_) => Verdict::Pass,
            };
        }
        if let Some(t) = p.query_token {
            return if self.token_is(t) {
                Verdict::PassSettingCookie
            } else {
                Verdict::Refuse(StatusCode::FORBIDDEN, "wrong token")
            };
        }
        match p.header_token.or(p.cookie_token) {
            None => Verdict::Refuse(
                StatusCode::UNAUTHORIZED,
                "a token is needed: open the address `torchx ui` printed",
            ),
            Some(t) if self.token_is(t) => Verdict::Pass,
            Some(_) => Verdict::Refuse(StatusCode::FORBIDDEN, "wrong token"),
        }
    }

    fn same_origin(&self, p: &Presented<'_>) -> bool {
        let site_ok = p
            .fetch_site
            .is_none_or(|s| s == "same-origin" || s == "none");
        let origin_ok = p.origin.is_none_or(|o| {
            o.strip_prefix("http://")
                .is_some_and(|rest| Some(rest) == p.host)
        });
        site_ok && origin_ok
    }
}

/// Compares without an early exit, so the time taken tells nothing about the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh token: 32 random bytes as hex.
pub fn new_token() -> torchx::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| torchx::Error::backend("ui", format!("no randomness for the token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn header(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v)
}

/// Headers every answer carries: nothing may frame, sniff or script the page from elsewhere,
/// and nothing is cached.
pub fn harden(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::CACHE_CONTROL, "no-store");
}

/// The middleware: judges, then serves (setting the cookie when the token came in the URL).
pub async fn check(
    State(guard): State<std::sync::Arc<Guard>>,
    req: Request,
    next: Next,
) -> Response {
    let headers = req.headers();
    let cookie_name = guard.cookie_name();
    let presented = Presented {
        method: req.method().as_str(),
        host: header(headers, header::HOST),
        query_token: query_token(req.uri().query()),
        cookie_token: cookie(headers, &cookie_name),
        header_token: header(headers, TOKEN_HEADER),
        origin: header(headers, header::ORIGIN),
        fetch_site: header(headers, "sec-fetch-site"),
    };
    let verdict = guard.judge(&presented);
    let mut response = match verdict {
        Verdict::Refuse(status, why) => (status, format!("torchx ui: {why}\n")).into_response(),
        Verdict::Pass => next.run(req).await,
        Verdict::PassSettingCookie if req.method() == Method::GET => {
            // Into the cookie, then out of the address bar (and the browser's history).
            let cookie = format!(
                "{cookie_name}={}; Path=/; HttpOnly; SameSite=Strict",
                guard.token
            );
            let mut r = (StatusCode::SEE_OTHER, "").into_response();
            r.headers_mut().insert(
                header::LOCATION,
                HeaderValue::from_str(req.uri().path()).unwrap_or(HeaderValue::from_static("/")),
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Verdict::PassSettingCookie => next.run(req).await,
    };
    harden(response.headers_mut());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard {
            token: "t0ken".into(),
            hosts: vec!["127.0.0.1".into(), "localhost".into()],
            port: 8080,
            any_address: false,
        }
    }

    fn get<'a>(host: &'a str) -> Presented<'a> {
        Presented {
            method: "GET",
            host: Some(host),
            ..Presented::default()
        }
    }

    #[test]
    fn a_request_needs_the_token_and_this_servers_host() {
        let g = guard();
        let refused = |p: &Presented<'_>| match g.judge(p) {
            Verdict::Refuse(s, _) => s.as_u16(),
            _ => 200,
        };
        assert_eq!(refused(&get("127.0.0.1:8080")), 401);
        let with = |cookie| Presented {
            cookie_token: Some(cookie),
            ..get("127.0.0.1:8080")
        };
        assert_eq!(refused(&with("t0ken")), 200);
        assert_eq!(refused(&with("other")), 403);
        assert_eq!(refused(&with("t0ke")), 403);
        assert_eq!(
            refused(&Presented {
                cookie_token: Some("t0ken"),
                ..get("evil.example:8080")
            }),
            403
        );
        assert_eq!(
            refused(&Presented {
                cookie_token: Some("t0ken"),
                ..get("127.0.0.1:9")
            }),
            403
        );
        assert_eq!(
            refused(&Presented {
                cookie_token: Some("t0ken"),
                host: None,
                ..get("")
            }),
            403
        );
        assert_eq!(
            g.judge(&Presented {
                query_token: Some("t0ken"),
                ..get("localhost:8080")
            }),
            Verdict::PassSettingCookie
        );
    }

    #[test]
    fn a_change_needs_a_post_with_the_header_from_this_origin() {
        let g = guard();
        let post = |header, origin, site| Presented {
            method: "POST",
            host: Some("127.0.0.1:8080"),
            cookie_token: Some("t0ken"),
            header_token: header,
            origin,
            fetch_site: site,
            ..Presented::default()
        };
        assert_eq!(
            g.judge(&post(
                Some("t0ken"),
                Some("http://127.0.0.1:8080"),
                Some("same-origin")
            )),
            Verdict::Pass
        );
        assert!(matches!(g.judge(&post(None, None, None)), Verdict::Refuse(s, _) if s == 401));
        assert!(matches!(g.judge(&post(Some("x"), None, None)), Verdict::Refuse(s, _) if s == 403));
        assert!(matches!(
            g.judge(&post(Some("t0ken"), Some("http://evil.example"), None)),
            Verdict::Refuse(s, _) if s == 403
        ));
        assert!(matches!(
            g.judge(&post(Some("t0ken"), None, Some("cross-site"))),
            Verdict::Refuse(s, _) if s == 403
        ));
        let delete = Presented {
            method: "DELETE",
            ..post(Some("t0ken"), None, None)
        };
        assert!(matches!(g.judge(&delete), Verdict::Refuse(s, _) if s == 405));
    }

    #[test]
    fn tokens_are_long_and_fresh() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
