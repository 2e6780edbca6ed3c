//! Java `.properties` syntax, as `java.util.Properties.load` reads Kafka's `server.properties`:
//! natural lines end at `\n`, `\r` or `\r\n`; a line whose first non-blank character is `#` or `!`
//! is a comment; a line ending in an odd number of backslashes continues on the next (whose leading
//! blanks are dropped); the key ends at the first unescaped `=`, `:` or blank; blanks and one `=`
//! or `:` after it are skipped; escapes `\t \n \r \f \uXXXX` and `\x` (= `x`) apply to keys and
//! values. A later duplicate key replaces an earlier one, as with `Properties`. Pure, no I/O.

/// One `key -> value` pair with the 1-based line it started on (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// Parses properties text. The only error is a malformed `\uXXXX` escape (Java refuses it too).
pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut out: Vec<Entry> = Vec::new();
    let lines = natural_lines(text);
    let mut i = 0;
    while i < lines.len() {
        let start_line = i + 1;
        let first = lines[i].trim_start_matches(is_blank);
        i += 1;
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines into one logical line.
        let mut logical = String::from(first);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.get(i) {
                Some(next) => {
                    logical.push_str(next.trim_start_matches(is_blank));
                    i += 1;
                }
                None => break,
            }
        }
        let (raw_key, raw_value) = split_key_value(&logical);
        let key = unescape(raw_key).map_err(|e| format!("line {start_line}: {e}"))?;
        let value = unescape(raw_value).map_err(|e| format!("line {start_line}: {e}"))?;
        out.retain(|e| e.key != key);
        out.push(Entry {
            key,
            value,
            line: start_line,
        });
    }
    Ok(out)
}

/// Java's whitespace for properties: space, tab, form feed.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&text[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&text[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < bytes.len() {
        lines.push(&text[start..]);
    }
    lines
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

/// Splits a logical line (leading blanks removed) into raw (still escaped) key and value.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    let mut separator = None;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => {
                key_end = i;
                separator = Some(i + 1);
                break;
            }
            c if is_blank(c) => {
                key_end = i;
                separator = Some(i);
                break;
            }
            _ => {}
        }
    }
    let Some(mut rest_start) = separator else {
        return (line, "");
    };
    let rest = &line[rest_start..];
    let trimmed = rest.trim_start_matches(is_blank);
    rest_start += rest.len() - trimmed.len();
    // After blanks, one `=` or `:` may still follow (`key = value`), when the key ended at a blank.
    if line[key_end..].starts_with(is_blank)
        && (trimmed.starts_with('=') || trimmed.starts_with(':'))
    {
        let after = trimmed[1..].trim_start_matches(is_blank);
        return (&line[..key_end], after);
    }
    (&line[..key_end], &line[rest_start..])
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| "Malformed \\uxxxx encoding.".to_string())?;
                // A lone surrogate half cannot be a Rust char: keep the replacement character.
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect()
    }

    fn p(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn separators_comments_and_blanks() {
        let text = "# comment\n! also comment\n\n  a=1\nb: 2\nc 3\nd = 4 \ne\n   f  :  x y  \n";
        assert_eq!(
            pairs(text),
            vec![
                p("a", "1"),
                p("b", "2"),
                p("c", "3"),
                p("d", "4 "),
                p("e", ""),
                p("f", "x y  "),
            ]
        );
    }

    #[test]
    fn continuations_and_escapes() {
        let text = "listeners=PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\nk\\=x=a\\tb\\u0041\\\\\nw\\ k=v\r\nz=\\q";
        assert_eq!(
            pairs(text),
            vec![
                p("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
                p("k=x", "a\tbA\\"),
                p("w k", "v"),
                p("z", "q"),
            ]
        );
        // An even number of trailing backslashes is an escaped backslash, not a continuation.
        assert_eq!(pairs("a=b\\\\\nc=d"), vec![p("a", "b\\"), p("c", "d")]);
        // A continuation line starting with '#' is data, not a comment.
        assert_eq!(pairs("a=1,\\\n#2"), vec![p("a", "1,#2")]);
    }

    #[test]
    fn later_duplicate_wins_and_line_numbers_are_kept() {
        let e = parse("a=1\n\nb=2\na=3\n").unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].key.as_str(), e[0].line), ("b", 3));
        assert_eq!((e[1].value.as_str(), e[1].line), ("3", 4));
    }

    #[test]
    fn malformed_unicode_escape_is_refused_with_its_line() {
        let e = parse("ok=1\nbad=\\u12G4\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("Malformed"), "{e}");
    }
}
