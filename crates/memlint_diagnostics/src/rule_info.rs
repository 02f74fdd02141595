//! What machine formats (SARIF, the language server) say about each rule.

use crate::Severity;

/// A rule's identity and documentation as shown by tools that read
/// memlint's output (SARIF `tool.driver.rules`, editor links).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// Code, e.g. `ML201`.
    pub code: String,
    /// Kebab-case name, e.g. `eval-without-no-grad`.
    pub name: String,
    /// The rule's severity, used as its default level.
    pub default_level: Severity,
    /// Whether the rule runs without being selected.
    pub default_enabled: bool,
    /// One sentence: what the rule finds.
    pub short_description: String,
    /// The rule's "What it does" section as plain text.
    pub full_description: String,
    /// The rule's whole documentation (markdown).
    pub help_markdown: String,
    /// Link to the rule's documentation page.
    pub help_uri: String,
}

impl RuleInfo {
    /// Builds the descriptions from a rule's markdown documentation, which
    /// starts with a `## What it does` section.
    pub fn from_doc(
        code: &str,
        name: &str,
        default_level: Severity,
        default_enabled: bool,
        doc: &str,
        help_uri: String,
    ) -> RuleInfo {
        let what = section(doc, "What it does");
        let full_description = what.split_whitespace().collect::<Vec<_>>().join(" ");
        let short_description = first_sentence(&full_description);
        RuleInfo {
            code: code.to_string(),
            name: name.to_string(),
            default_level,
            default_enabled,
            short_description,
            full_description,
            help_markdown: doc.trim().to_string(),
            help_uri,
        }
    }
}

/// The body of the `## {title}` section of a markdown text.
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let heading = format!("## {title}");
    let Some(start) = doc.find(&heading) else { return "" };
    let body = &doc[start + heading.len()..];
    let end = body.find("\n## ").unwrap_or(body.len());
    body[..end].trim()
}

fn first_sentence(text: &str) -> String {
    // A sentence ends at ". " or ":" followed by a space, outside backticks.
    let mut in_code = false;
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        match c {
            '`' => in_code = !in_code,
            '.' | ':' if !in_code && chars.get(i + 1).is_none_or(|n| n.is_whitespace()) => {
                let s: String = chars[..i].iter().collect();
                return format!("{s}.");
            }
            _ => {}
        }
    }
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_come_from_what_it_does() {
        let doc = "## What it does\nFlags `x.data` reads: they\nbypass autograd. More.\n\n## Why is this bad?\nBecause.\n";
        let r = RuleInfo::from_doc("ML103", "data-attribute", Severity::Warning, true, doc, "u".into());
        assert_eq!(r.short_description, "Flags `x.data` reads.");
        assert_eq!(r.full_description, "Flags `x.data` reads: they bypass autograd. More.");
        assert!(r.help_markdown.contains("## Why is this bad?"));
    }
}
