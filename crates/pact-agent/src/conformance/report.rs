//! The result of a conformance run: one [`Check`] per rule, as text, JSON
//! or JUnit XML.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::http::Evidence;

/// How a check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Outcome {
    Pass,
    Fail,
    /// The rule could not be exercised here; the reason says why.
    Skip,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Skip => "SKIP",
        }
    }
}

/// One check: the rule it tests (named after its docs/protocol.md section), how
/// it ended, why, and the offending response when it failed.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: String,
    pub outcome: Outcome,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    pub duration_ms: u128,
}

impl Check {
    /// `§3` of `§3.alg-none-refused`, `§5.3` of `§5.3.slow-down`.
    pub fn section(&self) -> &str {
        self.name
            .rsplit_once('.')
            .map(|(s, _)| s)
            .unwrap_or(&self.name)
    }

    /// `PASS §3.alg-none-refused — reason` and the evidence, indented.
    pub fn line(&self) -> String {
        let mut s = format!("{} {}", self.outcome.as_str(), self.name);
        if !self.reason.is_empty() {
            s.push_str(" — ");
            s.push_str(&self.reason);
        }
        if let Some(e) = &self.evidence {
            let _ = write!(s, "\n    {e}");
        }
        s
    }
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub card_url: String,
    pub profile: String,
    pub checks: Vec<Check>,
    #[serde(serialize_with = "as_secs")]
    pub duration: Duration,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Report {
    pub fn count(&self, outcome: Outcome) -> usize {
        self.checks.iter().filter(|c| c.outcome == outcome).count()
    }

    /// `true` when no check failed.
    pub fn is_success(&self) -> bool {
        self.count(Outcome::Fail) == 0
    }

    /// The check of that name.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// `N passed, N failed, N skipped`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.count(Outcome::Pass),
            self.count(Outcome::Fail),
            self.count(Outcome::Skip)
        )
    }

    /// Every check, grouped by section, then the summary.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let mut section = "";
        for c in &self.checks {
            if c.section() != section {
                section = c.section();
                let _ = writeln!(out, "\n{section}");
            }
            let _ = writeln!(out, "  {}", c.line().replace('\n', "\n  "));
        }
        let _ = writeln!(
            out,
            "\n{} in {:.1} s ({} profile, {})",
            self.summary(),
            self.duration.as_secs_f64(),
            self.profile,
            self.card_url
        );
        out
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_else(|_| json!({}));
        v["summary"] = json!({
            "passed": self.count(Outcome::Pass),
            "failed": self.count(Outcome::Fail),
            "skipped": self.count(Outcome::Skip),
        });
        v
    }

    /// JUnit XML: one `testsuite` per section, one `testcase` per check.
    pub fn to_junit(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"pact-conformance\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
            self.checks.len(),
            self.count(Outcome::Fail),
            self.count(Outcome::Skip),
            self.duration.as_secs_f64()
        );
        let mut sections: Vec<&str> = Vec::new();
        for c in &self.checks {
            if !sections.contains(&c.section()) {
                sections.push(c.section());
            }
        }
        for section in sections {
            let checks: Vec<&Check> = self
                .checks
                .iter()
                .filter(|c| c.section() == section)
                .collect();
            let fails = checks.iter().filter(|c| c.outcome == Outcome::Fail).count();
            let skips = checks.iter().filter(|c| c.outcome == Outcome::Skip).count();
            let _ = writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{fails}\" skipped=\"{skips}\">",
                xml_escape(&format!("PACT {section}")),
                checks.len()
            );
            for c in checks {
                let _ = write!(
                    out,
                    "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                    xml_escape(&format!("PACT {section}")),
                    xml_escape(&c.name),
                    c.duration_ms as f64 / 1000.0
                );
                match c.outcome {
                    Outcome::Pass => {
                        let _ = writeln!(out, "/>");
                    }
                    Outcome::Skip => {
                        let _ = writeln!(
                            out,
                            ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                            xml_escape(&c.reason)
                        );
                    }
                    Outcome::Fail => {
                        let detail = c
                            .evidence
                            .as_ref()
                            .map(ToString::to_string)
                            .unwrap_or_default();
                        let _ = writeln!(
                            out,
                            ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                            xml_escape(&c.reason),
                            xml_escape(&detail)
                        );
                    }
                }
            }
            let _ = writeln!(out, "  </testsuite>");
        }
        out.push_str("</testsuites>\n");
        out
    }
}

/// Escapes text for XML attributes and content; drops characters XML 1.0
/// cannot carry.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, outcome: Outcome) -> Check {
        Check {
            name: name.into(),
            outcome,
            reason: "a <reason> & \"more\"".into(),
            evidence: None,
            duration_ms: 5,
        }
    }

    #[test]
    fn sections_come_from_names() {
        assert_eq!(check("§5.3.slow-down", Outcome::Pass).section(), "§5.3");
        assert_eq!(check("§3.alg-none-refused", Outcome::Pass).section(), "§3");
    }

    #[test]
    fn junit_groups_by_section_and_escapes() {
        let r = Report {
            card_url: "u".into(),
            profile: "identity".into(),
            checks: vec![
                check("§3.a", Outcome::Pass),
                check("§3.b", Outcome::Fail),
                check("§4.c", Outcome::Skip),
            ],
            duration: Duration::from_millis(1500),
        };
        let x = r.to_junit();
        assert!(x.contains("<testsuite name=\"PACT §3\" tests=\"2\" failures=\"1\""));
        assert!(x.contains("<skipped message=\"a &lt;reason&gt; &amp; &quot;more&quot;\"/>"));
        assert!(!r.is_success());
        assert_eq!(r.summary(), "1 passed, 1 failed, 1 skipped");
        assert_eq!(r.to_json()["summary"]["failed"], 1);
    }
}
