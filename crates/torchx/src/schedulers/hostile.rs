//! Shell-hostile test strings, shared by the script renderers' property tests.

/// A deterministic generator of hostile strings (xorshift; no dependency needed).
pub(super) struct Hostile(pub u64);

impl Hostile {
    /// The next random number.
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A short string of shell-hostile pieces.
    pub(super) fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "$",
            "$HOME",
            "${app_id}",
            "${",
            "}",
            "'",
            "\"",
            "`",
            "\\",
            ";",
            "&&",
            "|",
            "\n",
            " ",
            "\t",
            "*",
            "?",
            "!",
            "#",
            "~",
            "(",
            ")",
            "<",
            ">",
            "a",
            "Z",
            "0",
            "é",
            "日本",
            "=",
            ",",
            "--x",
            "-",
        ];
        let n = self.next() % 8;
        (0..n)
            .map(|_| PIECES[(self.next() % PIECES.len() as u64) as usize])
            .collect()
    }
}
