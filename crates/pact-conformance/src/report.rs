//! The result of a conformance run: one [`Check`] per rule, as text, JSON,
//! JUnit XML or one HTML page.

use std::fmt::Write as _;
use std::time::Duration;

use pact_client::http::Evidence;
use serde::Serialize;
use serde_json::json;

use crate::rules::{Level, RuleId, section_of};

/// How a check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Outcome {
    Pass,
    /// A MUST was broken.
    Fail,
    /// A SHOULD was broken.
    Warn,
    /// A pactd convention was not followed (PACT leaves it open).
    Info,
    /// The rule could not be exercised here; the reason says why.
    Skip,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Warn => "WARN",
            Self::Info => "INFO",
            Self::Skip => "SKIP",
        }
    }
}

/// One check: the rule it tests, its level and source, how it ended, why,
/// and the offending response when it did not pass.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    #[serde(rename = "name")]
    pub id: RuleId,
    pub level: Level,
    pub source: &'static str,
    pub quote: &'static str,
    pub outcome: Outcome,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    pub duration_ms: u128,
}

impl Check {
    /// A check of `id` with its level and source from the catalogue.
    pub fn new(id: RuleId, outcome: Outcome, reason: impl Into<String>) -> Self {
        let rule = id.rule();
        Self {
            id,
            level: rule.level,
            source: rule.source,
            quote: rule.quote,
            outcome,
            reason: reason.into(),
            evidence: None,
            duration_ms: 0,
        }
    }

    /// `§3.alg-none-refused`.
    pub fn name(&self) -> &'static str {
        self.id.name()
    }

    /// `§3` of `§3.alg-none-refused`, `§5.3` of `§5.3.slow-down`.
    pub fn section(&self) -> &'static str {
        section_of(self.id.name())
    }

    /// `PASS §3.alg-none-refused [MUST, PACT §3] — reason` and the
    /// evidence, indented.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} {} [{}, {}]",
            self.outcome.as_str(),
            self.name(),
            self.level.as_str(),
            self.source
        );
        if !self.reason.is_empty() {
            s.push_str(" — ");
            s.push_str(&self.reason);
        }
        if matches!(self.outcome, Outcome::Fail | Outcome::Warn | Outcome::Info) {
            let _ = write!(s, "\n    {}: “{}”", self.source, self.quote);
        }
        if let Some(e) = &self.evidence {
            let _ = write!(s, "\n    {e}");
        }
        s
    }

    /// Shown in text output by default: everything but pactd conventions.
    pub fn shown_by_default(&self) -> bool {
        self.level != Level::Pactd
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

    /// `true` when no check failed: WARN and INFO never fail a run.
    pub fn is_success(&self) -> bool {
        self.count(Outcome::Fail) == 0
    }

    /// The check of that name.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name() == name)
    }

    /// `N passed; N FAIL (MUST), N WARN (SHOULD), N INFO (pactd); N skipped`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed; {} FAIL (MUST), {} WARN (SHOULD), {} INFO (pactd); {} skipped",
            self.count(Outcome::Pass),
            self.count(Outcome::Fail),
            self.count(Outcome::Warn),
            self.count(Outcome::Info),
            self.count(Outcome::Skip)
        )
    }

    /// Every check, grouped by section, then the summary. pactd
    /// conventions only with `show_pactd`.
    pub fn to_text(&self, show_pactd: bool) -> String {
        let mut out = String::new();
        let mut section = "";
        let mut hidden = 0;
        for c in &self.checks {
            if !show_pactd && !c.shown_by_default() {
                hidden += 1;
                continue;
            }
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
        if hidden > 0 {
            let _ = writeln!(
                out,
                "({hidden} pactd conventions not shown: --pactd or --verbose shows them)"
            );
        }
        out
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_else(|_| json!({}));
        v["summary"] = json!({
            "passed": self.count(Outcome::Pass),
            "failed": self.count(Outcome::Fail),
            "warnings": self.count(Outcome::Warn),
            "info": self.count(Outcome::Info),
            "skipped": self.count(Outcome::Skip),
        });
        v
    }

    fn sections(&self) -> Vec<&'static str> {
        let mut sections: Vec<&'static str> = Vec::new();
        for c in &self.checks {
            if !sections.contains(&c.section()) {
                sections.push(c.section());
            }
        }
        sections
    }

    /// JUnit XML: one `testsuite` per section, one `testcase` per check.
    /// Only FAIL is a failure; WARN and INFO pass with a note.
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
        for section in self.sections() {
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
                    xml_escape(c.name()),
                    c.duration_ms as f64 / 1000.0
                );
                let detail = c
                    .evidence
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default();
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
                    Outcome::Warn | Outcome::Info => {
                        let _ = writeln!(
                            out,
                            ">\n      <system-out>{}</system-out>\n    </testcase>",
                            xml_escape(&format!(
                                "{} ({} {}): {}\n{detail}",
                                c.outcome.as_str(),
                                c.level.as_str(),
                                c.source,
                                c.reason
                            ))
                        );
                    }
                    Outcome::Fail => {
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

    /// One self-contained HTML page: the summary, then every check grouped
    /// by section with its level, source, reason and the request and
    /// response excerpt. Everything from the Provider is escaped; the page
    /// has no script.
    pub fn to_html(&self) -> String {
        let e = xml_escape;
        let mut out = String::from(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        );
        let _ = writeln!(
            out,
            "<title>PACT conformance: {}</title>",
            e(&self.card_url)
        );
        out.push_str(HTML_STYLE);
        out.push_str("</head>\n<body>\n");
        let _ = writeln!(
            out,
            "<h1>PACT conformance report</h1>\n<p class=\"meta\">{} profile · <code>{}</code> · {:.1} s</p>",
            e(&self.profile),
            e(&self.card_url),
            self.duration.as_secs_f64()
        );
        let _ = writeln!(out, "<p class=\"summary\">");
        for (outcome, label) in [
            (Outcome::Pass, "passed"),
            (Outcome::Fail, "FAIL (MUST)"),
            (Outcome::Warn, "WARN (SHOULD)"),
            (Outcome::Info, "INFO (pactd)"),
            (Outcome::Skip, "skipped"),
        ] {
            let _ = writeln!(
                out,
                "<span class=\"badge {}\">{} {label}</span>",
                outcome.as_str().to_ascii_lowercase(),
                self.count(outcome)
            );
        }
        out.push_str(
            "</p>\n<p class=\"meta\">MUST broken: FAIL (the run fails). SHOULD broken: WARN. \
             pactd convention not followed: INFO. Only FAIL counts in the exit status.</p>\n",
        );
        for section in self.sections() {
            let _ = writeln!(out, "<section>\n<h2>PACT {}</h2>", e(section));
            for c in self.checks.iter().filter(|c| c.section() == section) {
                let outcome = c.outcome.as_str();
                let _ = writeln!(
                    out,
                    "<article class=\"check {lower}\">\n<h3><span class=\"badge {lower}\">{outcome}</span> \
                     <code>{}</code> <span class=\"level\">{}</span></h3>",
                    e(c.name()),
                    e(c.level.as_str()),
                    lower = outcome.to_ascii_lowercase(),
                );
                let _ = writeln!(
                    out,
                    "<p class=\"rule\">{}</p>\n<blockquote>{}: “{}”</blockquote>",
                    e(c.id.rule().text),
                    e(c.source),
                    e(c.quote)
                );
                if !c.reason.is_empty() {
                    let _ = writeln!(out, "<p class=\"reason\">{}</p>", e(&c.reason));
                }
                if let Some(ev) = &c.evidence {
                    let _ = write!(
                        out,
                        "<details open><summary>Request and response</summary>\n<pre>{}",
                        e(&ev.request)
                    );
                    for line in &ev.sent {
                        let _ = write!(out, "\n{}", e(line));
                    }
                    let _ = write!(out, "\n\n→ HTTP {}", ev.status);
                    for (k, v) in &ev.headers {
                        let _ = write!(out, "\n{}: {}", e(k), e(v));
                    }
                    if ev.body.is_empty() {
                        out.push_str("\n\n(empty body)");
                    } else {
                        let _ = write!(out, "\n\n{}", e(&ev.body));
                    }
                    out.push_str("</pre>\n</details>\n");
                }
                out.push_str("</article>\n");
            }
            out.push_str("</section>\n");
        }
        out.push_str("</body>\n</html>\n");
        out
    }
}

const HTML_STYLE: &str = "<style>\n\
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#1b1b1b}\n\
h2{border-bottom:1px solid #ccc;margin-top:2rem}\n\
h3{font-size:1rem;margin:0 0 .3rem}\n\
.meta{color:#555}\n\
.check{border-left:4px solid #ccc;padding:.4rem .8rem;margin:.6rem 0;background:#fafafa}\n\
.check.pass{border-color:#2e7d32}.check.fail{border-color:#c62828}\n\
.check.warn{border-color:#ef6c00}.check.info{border-color:#1565c0}.check.skip{border-color:#9e9e9e}\n\
.badge{display:inline-block;padding:0 .45rem;border-radius:3px;color:#fff;font-weight:600;font-size:.85rem;margin-right:.3rem}\n\
.badge.pass{background:#2e7d32}.badge.fail{background:#c62828}.badge.warn{background:#ef6c00}\n\
.badge.info{background:#1565c0}.badge.skip{background:#757575}\n\
.level{color:#555;font-weight:normal;font-size:.85rem}\n\
blockquote{margin:.2rem 0;color:#444;font-style:italic}\n\
pre{white-space:pre-wrap;word-break:break-all;background:#f0f0f0;padding:.5rem}\n\
.rule,.reason{margin:.2rem 0}\n\
</style>\n";

/// Escapes text for XML and HTML attributes and content; drops characters
/// XML 1.0 cannot carry.
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

    fn check(id: RuleId, outcome: Outcome) -> Check {
        Check::new(id, outcome, "a <reason> & \"more\"")
    }

    fn report() -> Report {
        let mut failed = check(RuleId::AlgNoneRefused, Outcome::Fail);
        failed.evidence = Some(Evidence {
            request: "POST http://p.example/a2a/d/message:send".into(),
            sent: vec!["authorization: Bearer <312 bytes>".into()],
            status: 200,
            headers: vec![("content-type".into(), "text/html".into())],
            body: "<script>alert(1)</script>".into(),
        });
        Report {
            card_url: "http://p.example/<card>".into(),
            profile: "identity".into(),
            checks: vec![
                check(RuleId::MalformedRefused, Outcome::Pass),
                failed,
                check(RuleId::JkuNotFetched, Outcome::Warn),
                check(RuleId::PactdOversized401, Outcome::Info),
                check(RuleId::ClosedContext, Outcome::Skip),
            ],
            duration: Duration::from_millis(1500),
        }
    }

    #[test]
    fn sections_come_from_names() {
        assert_eq!(check(RuleId::SlowDown, Outcome::Pass).section(), "§5.3");
        assert_eq!(check(RuleId::AlgNoneRefused, Outcome::Pass).section(), "§3");
    }

    #[test]
    fn only_fail_fails_and_the_summary_counts_each_level() {
        let r = report();
        assert!(!r.is_success());
        assert_eq!(
            r.summary(),
            "1 passed; 1 FAIL (MUST), 1 WARN (SHOULD), 1 INFO (pactd); 1 skipped"
        );
        let j = r.to_json();
        assert_eq!(j["summary"]["failed"], 1);
        assert_eq!(j["summary"]["warnings"], 1);
        assert_eq!(j["checks"][1]["name"], "§3.alg-none-refused");
        assert_eq!(j["checks"][1]["level"], "must");
        assert_eq!(j["checks"][1]["source"], "PACT §3; RFC 8725 §3.1");
        let mut ok = r.clone();
        ok.checks.remove(1);
        assert!(ok.is_success(), "WARN and INFO never fail a run");
    }

    #[test]
    fn text_hides_pactd_conventions_unless_asked() {
        let r = report();
        assert!(!r.to_text(false).contains("§3.pactd-oversized-401"));
        assert!(r.to_text(false).contains("1 pactd conventions not shown"));
        assert!(
            r.to_text(true)
                .contains("INFO §3.pactd-oversized-401 [pactd")
        );
    }

    #[test]
    fn junit_groups_by_section_and_escapes() {
        let x = report().to_junit();
        assert!(x.contains("<testsuite name=\"PACT §3\" tests=\"4\" failures=\"1\""));
        assert!(x.contains("<skipped message=\"a &lt;reason&gt; &amp; &quot;more&quot;\"/>"));
        assert!(x.contains("<system-out>WARN (SHOULD RFC 8725 §3.10)"));
    }

    #[test]
    fn html_escapes_everything_and_groups_by_section() {
        let h = report().to_html();
        assert!(!h.contains("<script>"), "no script, and nothing unescaped");
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(h.contains("<h2>PACT §3</h2>") && h.contains("<h2>PACT §4</h2>"));
        assert!(h.contains("http://p.example/&lt;card&gt;"));
        assert!(
            h.contains("<span class=\"badge fail\">FAIL</span> <code>§3.alg-none-refused</code>")
        );
        assert!(h.contains("PACT §3; RFC 8725 §3.1: “alg: ES256 or RS256"));
        assert!(h.contains("message:send\nauthorization: Bearer &lt;312 bytes&gt;\n\n→ HTTP 200"));
    }
}
