//! Unique app ids, encoded exactly as TorchX's `random_id` (Kubernetes-name-safe, no `8`).

const START: &[u8] = b"bcdfghjklmnpqrstvwxz";
const END: &[u8] = b"bcdfghjklmnpqrstvwxz012345679";

/// Encodes a 64-bit value as TorchX does: base-20 first char, base-29 after, least significant
/// first.
pub(super) fn encode_id(mut v: u64) -> String {
    let mut out = String::new();
    while v > 0 {
        let alphabet = if out.is_empty() { START } else { END };
        let n = alphabet.len() as u64;
        out.push(alphabet[(v % n) as usize] as char);
        v /= n;
    }
    out
}

/// A random 64-bit value from the OS (`getrandom`: getrandom(2), or the platform's equivalent).
pub(super) fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    if getrandom::getrandom(&mut buf).is_ok() {
        return u64::from_be_bytes(buf);
    }
    // No OS randomness (a sandbox without it): mix time and pid, so ids still differ between
    // processes and calls.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 32) ^ 0x9E37_79B9_7F4A_7C15
}

/// A fresh random id such as `fzfjxlmln9`.
pub fn random_id() -> String {
    loop {
        let id = encode_id(random_u64());
        if !id.is_empty() {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_matches_torchx() {
        // TorchX: os.urandom returning bytes(range(8)) gives "fzfjxlmln9".
        assert_eq!(
            encode_id(u64::from_be_bytes([0, 1, 2, 3, 4, 5, 6, 7])),
            "fzfjxlmln9"
        );
        assert!(!random_id().contains('8'));
        assert_ne!(random_id(), random_id());
    }
}
