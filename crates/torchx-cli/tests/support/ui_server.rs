//! A `torchx ui` started by a test, and one HTTP/1.1 request at a time to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use super::Env;

/// A `torchx ui` of the test's environment, stopped when dropped.
pub struct Server {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub token: String,
}

impl Server {
    pub fn start(env: &Env, extra: &[&str]) -> Server {
        let mut args = vec!["ui", "--port", "0"];
        args.extend_from_slice(extra);
        Server::spawn(env.cmd(&args))
    }

    /// `torchx ui` as `cmd` starts it.
    pub fn spawn(mut cmd: std::process::Command) -> Server {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("torchx ui: http://")
            .unwrap_or_else(|| panic!("first line: {line:?}"));
        let (addr, token) = url.split_once("/?token=").unwrap();
        Server {
            child,
            addr: addr.to_string(),
            token: token.to_string(),
        }
    }

    pub fn port(&self) -> &str {
        self.addr.rsplit_once(':').unwrap().1
    }

    pub fn cookie(&self) -> String {
        format!("Cookie: torchx_ui_{}={}", self.port(), self.token)
    }

    /// A request with this server's cookie.
    pub fn get(&self, path: &str) -> Reply {
        request(
            &self.addr,
            "GET",
            path,
            &[&format!("Host: {}", self.addr), &self.cookie()],
            "",
        )
    }

    pub fn json(&self, path: &str) -> serde_json::Value {
        let r = self.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        serde_json::from_str(&r.body).unwrap()
    }

    /// A change as the page makes it.
    pub fn post(&self, path: &str, handle: &str) -> Reply {
        request(
            &self.addr,
            "POST",
            path,
            &[
                &format!("Host: {}", self.addr),
                &self.cookie(),
                &format!("X-Torchx-Token: {}", self.token),
                &format!("Origin: http://{}", self.addr),
                "Content-Type: application/json",
            ],
            &serde_json::json!({ "handle": handle }).to_string(),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// One HTTP/1.1 request (the connection closes after it), read to the end.
pub fn request(addr: &str, method: &str, path: &str, headers: &[&str], body: &str) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    Reply {
        status,
        head: head.to_string(),
        body,
    }
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

pub fn encode(handle: &str) -> String {
    handle
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
