//! The person's pages in several languages (Project Fluent, `locales/*.ftl`).
//!
//! The language of a request is, in order: the `pactd_lang` cookie set by the
//! switch on every page (`GET /lang/{code}?next=…`, a plain link, so it works
//! without JavaScript), then the browser's `Accept-Language` (RFC 9110
//! §12.5.4, matched by RFC 4647 §3.4 "lookup"), then English.
//!
//! [`scope`] runs each request inside a task-local [`Ctx`] holding that
//! language, the page's own address (for the switch's way back) and, once a
//! handler knows it, the brand whose look an error page should carry. The
//! templates and the handlers' messages read it through [`t`] and friends; a
//! background task (the password-reset mail) gets the [`Lang`] passed to it.
//!
//! The staff console (`/admin`) stays English: its pages and errors get no
//! switch and the English texts.
//!
//! Brand names and scope descriptions come from the merchant and are shown as
//! they are: they are arguments of messages, never keys.

use std::cell::RefCell;
use std::sync::LazyLock;

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use fluent_bundle::concurrent::FluentBundle;
use fluent_bundle::{FluentArgs, FluentResource, FluentValue};
use pact_node::node::Node;
use serde::Deserialize;

use super::page::PageError;
use super::security;
use super::session;
use crate::who::Look;

/// A language the pages are complete in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    De,
}

/// Every language, the default first. Adding one: see docs/web-pages.md.
pub const ALL: [Lang; 2] = [Lang::En, Lang::De];

/// The Fluent sources, one file per language, compiled into the binary.
const SOURCES: [(Lang, &str); 2] = [
    (Lang::En, include_str!("../../../../locales/en.ftl")),
    (Lang::De, include_str!("../../../../locales/de.ftl")),
];

impl Lang {
    /// The BCP 47 tag, for `<html lang>`, `Content-Language` and the cookie.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::De => "de",
        }
    }

    /// The language's own name for itself, as the switch shows it.
    pub fn endonym(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::De => "Deutsch",
        }
    }

    pub fn from_code(code: &str) -> Option<Lang> {
        ALL.into_iter()
            .find(|l| l.code().eq_ignore_ascii_case(code))
    }

    fn index(self) -> usize {
        match self {
            Lang::En => 0,
            Lang::De => 1,
        }
    }

    /// The message `key` with its arguments, in this language.
    pub fn message(self, key: &str, args: &[(&str, Arg)]) -> String {
        let bundle = &BUNDLES[self.index()];
        let Some(pattern) = bundle.get_message(key).and_then(|m| m.value()) else {
            // The key-completeness test keeps this from happening; if it
            // does, the key is at least something a person can report.
            tracing::error!(key, lang = self.code(), "missing translation");
            return key.to_owned();
        };
        let mut fargs = FluentArgs::new();
        for (name, value) in args {
            let v = match value {
                Arg::Text(s) => FluentValue::from(s.as_str()),
                Arg::Number(n) => FluentValue::from(*n),
            };
            fargs.set(*name, v);
        }
        let mut errors = Vec::new();
        let text = bundle.format_pattern(pattern, Some(&fargs), &mut errors);
        if !errors.is_empty() {
            tracing::error!(key, lang = self.code(), ?errors, "translation failed");
        }
        text.into_owned()
    }
}

/// A message argument: text (shown as given) or a number (which also picks
/// the plural form, Unicode CLDR plural rules).
#[derive(Clone, Debug)]
pub enum Arg {
    Text(String),
    Number(i64),
}

/// What may be passed as a message argument, through any number of
/// references (templates hand over `&field`, loops `&&item`).
pub trait IntoArg {
    fn into_arg(self) -> Arg;
}

impl<T: ToArg + ?Sized> IntoArg for &T {
    fn into_arg(self) -> Arg {
        self.to_arg()
    }
}

impl IntoArg for String {
    fn into_arg(self) -> Arg {
        Arg::Text(self)
    }
}

macro_rules! number_into_arg {
    ($($t:ty),*) => {$(
        impl IntoArg for $t {
            fn into_arg(self) -> Arg {
                Arg::Number(i64::try_from(self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
number_into_arg!(i64, i32, u32, u64, usize);

/// A borrowed argument.
pub trait ToArg {
    fn to_arg(&self) -> Arg;
}

impl ToArg for str {
    fn to_arg(&self) -> Arg {
        Arg::Text(self.to_owned())
    }
}

impl ToArg for String {
    fn to_arg(&self) -> Arg {
        Arg::Text(self.clone())
    }
}

impl<T: ToArg + ?Sized> ToArg for &T {
    fn to_arg(&self) -> Arg {
        (**self).to_arg()
    }
}

macro_rules! number_to_arg {
    ($($t:ty),*) => {$(
        impl ToArg for $t {
            fn to_arg(&self) -> Arg {
                Arg::Number(i64::try_from(*self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
number_to_arg!(i64, i32, u32, u64, usize);

impl<T: IntoArg> From<T> for Arg {
    fn from(v: T) -> Self {
        v.into_arg()
    }
}

static BUNDLES: LazyLock<Vec<FluentBundle<FluentResource>>> = LazyLock::new(|| {
    SOURCES
        .iter()
        .map(|(lang, source)| {
            let resource = FluentResource::try_new((*source).to_owned()).unwrap_or_else(
                |(partial, errors)| {
                    tracing::error!(lang = lang.code(), ?errors, "translation file has errors");
                    partial
                },
            );
            let id = lang.code().parse().unwrap_or_default();
            let mut bundle = FluentBundle::new_concurrent(vec![id]);
            // Unicode isolation marks (U+2068/U+2069) around arguments would
            // protect right-to-left names; both languages today are
            // left-to-right, and the marks would end up in copied text.
            bundle.set_use_isolating(false);
            if let Err(errors) = bundle.add_resource(resource) {
                tracing::error!(
                    lang = lang.code(),
                    ?errors,
                    "translation file has duplicates"
                );
            }
            bundle
        })
        .collect()
});

// ---------------------------------------------------------------- request scope

/// What a page needs to know about the request it answers.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub lang: Lang,
    /// The page's address (path and query), where the switch comes back to.
    pub here: String,
    /// Whether the page offers the switch (not on the staff console).
    pub switch: bool,
    /// The brand, once a handler knows which one the page is about: error
    /// pages then carry its name and look.
    pub brand: Option<(String, Look)>,
}

impl Default for Ctx {
    fn default() -> Self {
        Self {
            lang: Lang::En,
            here: "/".to_owned(),
            switch: false,
            brand: None,
        }
    }
}

tokio::task_local! {
    static CTX: RefCell<Ctx>;
}

/// The current request's context (the default outside a request).
pub fn ctx() -> Ctx {
    CTX.try_with(|c| c.borrow().clone()).unwrap_or_default()
}

/// Runs `f` with `lang` as the language, outside a request (a step-up
/// task's message, tests).
pub fn with_lang<T>(lang: Lang, f: impl FnOnce() -> T) -> T {
    CTX.sync_scope(
        RefCell::new(Ctx {
            lang,
            ..Ctx::default()
        }),
        f,
    )
}

/// The current request's language.
pub fn current() -> Lang {
    CTX.try_with(|c| c.borrow().lang).unwrap_or(Lang::En)
}

/// A page answering a POST tells where a GET shows the same page again (the
/// POST's own URL lacks what the form carried, such as the brand).
pub fn set_here(here: String) {
    let _ = CTX.try_with(|c| c.borrow_mut().here = here);
}

/// The page is about this brand: error pages from here on carry its look.
pub fn brand_known(name: &str, look: Look) {
    let _ = CTX.try_with(|c| c.borrow_mut().brand = Some((name.to_owned(), look)));
}

/// The look of the brand the page is about, when a handler has said which.
pub fn known_look() -> Look {
    CTX.try_with(|c| c.borrow().brand.as_ref().map(|b| b.1.clone()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Stands for a user code in a translated sentence that the page splits
/// there ([`around_code`]), so that the code sits in an element of its own
/// and never breaks across lines (`white-space: nowrap`, issue 30, item 8).
/// A private-use character: never in a translation.
pub const CODE_MARK: &str = "\u{e000}";

/// `sentence` before and after [`CODE_MARK`] (all of it before, when the
/// translation left the code out).
pub fn around_code(sentence: &str) -> (String, String) {
    match sentence.split_once(CODE_MARK) {
        Some((before, after)) => (before.to_owned(), after.to_owned()),
        None => (sentence.to_owned(), String::new()),
    }
}

/// The message `key` in the request's language.
pub fn t(key: &str) -> String {
    current().message(key, &[])
}

/// … with one argument.
pub fn t1(key: &str, name: &str, value: impl IntoArg) -> String {
    current().message(key, &[(name, value.into_arg())])
}

/// … with two arguments.
pub fn t2(key: &str, n1: &str, v1: impl IntoArg, n2: &str, v2: impl IntoArg) -> String {
    current().message(key, &[(n1, v1.into_arg()), (n2, v2.into_arg())])
}

/// … with three arguments.
pub fn t3(
    key: &str,
    n1: &str,
    v1: impl IntoArg,
    n2: &str,
    v2: impl IntoArg,
    n3: &str,
    v3: impl IntoArg,
) -> String {
    current().message(
        key,
        &[
            (n1, v1.into_arg()),
            (n2, v2.into_arg()),
            (n3, v3.into_arg()),
        ],
    )
}

/// … with four arguments.
#[allow(clippy::too_many_arguments)]
pub fn t4(
    key: &str,
    n1: &str,
    v1: impl IntoArg,
    n2: &str,
    v2: impl IntoArg,
    n3: &str,
    v3: impl IntoArg,
    n4: &str,
    v4: impl IntoArg,
) -> String {
    current().message(
        key,
        &[
            (n1, v1.into_arg()),
            (n2, v2.into_arg()),
            (n3, v3.into_arg()),
            (n4, v4.into_arg()),
        ],
    )
}

/// One entry of the language switch.
#[derive(Debug)]
pub struct SwitchLink {
    pub code: &'static str,
    pub name: &'static str,
    pub href: String,
    pub current: bool,
}

/// The switch's entries for the current page (empty on the staff console).
pub fn switch_links() -> Vec<SwitchLink> {
    let c = ctx();
    if !c.switch {
        return Vec::new();
    }
    let next = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("next", &c.here)
        .finish();
    ALL.into_iter()
        .map(|l| SwitchLink {
            code: l.code(),
            name: l.endonym(),
            href: format!("/lang/{}?{next}", l.code()),
            current: l == c.lang,
        })
        .collect()
}

/// The name of the language cookie: `__Host-` on HTTPS, like the session's.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-pactd_lang"
    } else {
        "pactd_lang"
    }
}

fn cookie_lang(headers: &HeaderMap, name: &str) -> Option<Lang> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| Lang::from_code(v))
}

/// The language for a request: the switch's cookie, else `Accept-Language`.
pub fn negotiate(headers: &HeaderMap, secure: bool) -> Lang {
    if let Some(l) = cookie_lang(headers, cookie_name(secure)) {
        return l;
    }
    let accept = headers
        .get_all(header::ACCEPT_LANGUAGE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    from_accept_language(&accept)
}

/// RFC 9110 §12.5.4: `Accept-Language = #( language-range [ weight ] )`,
/// `weight = OWS ";" OWS "q=" qvalue` (§12.4.2). The ranges are tried from
/// the highest quality down (equal qualities in the order given); each is
/// matched by RFC 4647 §3.4 lookup (`de-CH-1996` → `de-CH` → `de`). `q=0`
/// means "not acceptable" (§12.4.2), and `*` stands for any language not
/// named otherwise. Malformed members are ignored, not fatal.
pub fn from_accept_language(value: &str) -> Lang {
    let mut ranges: Vec<(String, u16)> = value
        .split(',')
        .filter_map(|member| {
            let mut parts = member.split(';');
            let range = parts.next()?.trim();
            if !is_language_range(range) {
                return None;
            }
            let mut q = 1000;
            for p in parts {
                let (k, v) = p.trim().split_once('=')?;
                if k.trim().eq_ignore_ascii_case("q") {
                    q = qvalue(v.trim())?;
                }
            }
            Some((range.to_ascii_lowercase(), q))
        })
        .collect();
    // Stable: equal weights keep the order the browser sent.
    ranges.sort_by_key(|r| std::cmp::Reverse(r.1));
    let refused = |l: Lang| {
        ranges
            .iter()
            .any(|(r, q)| *q == 0 && lookup(r) == Some(l) && r != "*")
    };
    for (range, q) in &ranges {
        if *q == 0 {
            continue;
        }
        if range == "*" {
            if let Some(l) = ALL
                .into_iter()
                .find(|l| !refused(*l) && !ranges.iter().any(|(r, _)| lookup(r) == Some(*l)))
            {
                return l;
            }
            continue;
        }
        if let Some(l) = lookup(range)
            && !refused(l)
        {
            return l;
        }
    }
    Lang::En
}

/// RFC 4647 §3.4: drop subtags from the end until a language matches.
fn lookup(range: &str) -> Option<Lang> {
    let mut r = range;
    loop {
        if let Some(l) = Lang::from_code(r) {
            return Some(l);
        }
        let (shorter, _) = r.rsplit_once('-')?;
        r = shorter;
    }
}

/// RFC 4647 §2.1: `(1*8ALPHA *("-" 1*8alphanum)) / "*"`.
fn is_language_range(r: &str) -> bool {
    if r == "*" {
        return true;
    }
    let mut subtags = r.split('-');
    let first_ok = subtags
        .next()
        .is_some_and(|s| (1..=8).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphabetic()));
    first_ok
        && subtags
            .all(|s| (1..=8).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// RFC 9110 §12.4.2: `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`,
/// in thousandths.
fn qvalue(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_value = format!("{frac:0<3}").parse::<u16>().ok()?;
    match int {
        "0" => Some(frac_value),
        "1" if frac_value == 0 => Some(1000),
        _ => None,
    }
}

/// The layer that runs every request inside its [`Ctx`], and names the
/// language of a page in `Content-Language` (RFC 9110 §8.5).
pub async fn scope(State(node): State<Node>, req: Request, next: Next) -> Response {
    let staff = req.uri().path().starts_with("/admin");
    let lang = if staff {
        Lang::En
    } else {
        negotiate(req.headers(), session::is_secure(&node))
    };
    let here = req
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    let ctx = Ctx {
        lang,
        here,
        switch: !staff,
        brand: None,
    };
    let mut res = CTX.scope(RefCell::new(ctx), next.run(req)).await;
    let is_page = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if is_page && !staff {
        res.headers_mut().insert(
            header::CONTENT_LANGUAGE,
            HeaderValue::from_static(lang.code()),
        );
        // The same address answers in another language for another browser
        // (RFC 9110 §12.5.5); pages are `no-store`, but a shared cache that
        // ignores that must still not mix them up.
        res.headers_mut().append(
            header::VARY,
            HeaderValue::from_static("Accept-Language, Cookie"),
        );
    }
    res
}

#[derive(Debug, Deserialize)]
pub struct SwitchQuery {
    pub next: Option<String>,
}

/// `GET /lang/{code}?next=/path`: remembers the choice in a cookie and goes
/// back. A plain link, so it works without JavaScript; it changes nothing but
/// the language, so it needs no CSRF token (a forged link can at worst switch
/// someone's pages to another language, which the same switch undoes).
pub async fn switch(
    State(node): State<Node>,
    Path(code): Path<String>,
    Query(q): Query<SwitchQuery>,
) -> Result<Response, PageError> {
    let Some(lang) = Lang::from_code(&code) else {
        return Err(PageError::NotFound(t("err-no-such-language")));
    };
    let secure = session::is_secure(&node);
    let cookie = format!(
        "{}={}; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax{}",
        cookie_name(secure),
        lang.code(),
        if secure { "; Secure" } else { "" }
    );
    let to = security::safe_next(q.next.as_deref());
    let mut res = Redirect::to(&to).into_response();
    *res.status_mut() = StatusCode::SEE_OTHER;
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(PageError::internal)?,
    );
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_quality_values_pick_the_language() {
        assert_eq!(from_accept_language(""), Lang::En);
        assert_eq!(from_accept_language("de"), Lang::De);
        assert_eq!(from_accept_language("de-CH-1996"), Lang::De);
        assert_eq!(from_accept_language("DE-at"), Lang::De);
        assert_eq!(from_accept_language("fr, de;q=0.5, en;q=0.4"), Lang::De);
        assert_eq!(from_accept_language("en;q=0.4, de;q=0.8"), Lang::De);
        assert_eq!(from_accept_language("de;q=0.8, en;q=0.9"), Lang::En);
        // Equal weights: the order given.
        assert_eq!(from_accept_language("de, en"), Lang::De);
        assert_eq!(from_accept_language("en , de"), Lang::En);
        // q=0 refuses, whatever comes first.
        assert_eq!(from_accept_language("de-AT, de;q=0"), Lang::En);
        assert_eq!(from_accept_language("*, en;q=0"), Lang::De);
        assert_eq!(from_accept_language("fr, *;q=0.1"), Lang::En);
        // Malformed members are skipped; the rest still counts.
        assert_eq!(
            from_accept_language("x_y, de;q=2, fr;q=abc, de;q=0.3"),
            Lang::De
        );
        assert_eq!(from_accept_language("de;q=1.5"), Lang::En);
        assert_eq!(from_accept_language("de;q=0.0001"), Lang::En);
        assert_eq!(from_accept_language("toolongsubtag-de"), Lang::En);
        assert_eq!(from_accept_language(";;;,,,=="), Lang::En);
    }

    #[test]
    fn qvalues_follow_the_grammar() {
        assert_eq!(qvalue("1"), Some(1000));
        assert_eq!(qvalue("1.000"), Some(1000));
        assert_eq!(qvalue("0.5"), Some(500));
        assert_eq!(qvalue("0.005"), Some(5));
        assert_eq!(qvalue("0"), Some(0));
        assert_eq!(qvalue("1.001"), None);
        assert_eq!(qvalue("2"), None);
        assert_eq!(qvalue(".5"), None);
        assert_eq!(qvalue("0.5000"), None);
    }

    #[test]
    fn the_cookie_wins_over_the_header() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_LANGUAGE, HeaderValue::from_static("de"));
        assert_eq!(negotiate(&h, true), Lang::De);
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; __Host-pactd_lang=en"),
        );
        assert_eq!(negotiate(&h, true), Lang::En);
        // The plain-HTTP name does not count on HTTPS (a sibling could plant it).
        h.insert(header::COOKIE, HeaderValue::from_static("pactd_lang=en"));
        assert_eq!(negotiate(&h, true), Lang::De);
        // An unknown value is ignored.
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("__Host-pactd_lang=xx"),
        );
        assert_eq!(negotiate(&h, true), Lang::De);
    }

    // ------------------------------------------------------------ the files

    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// Each message of a `.ftl` file with the variables it uses.
    fn messages(lang: Lang) -> BTreeMap<String, BTreeSet<String>> {
        let text = SOURCES
            .iter()
            .find(|(l, _)| *l == lang)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut current: Option<String> = None;
        for line in text.lines() {
            if line.starts_with(|c: char| c.is_ascii_lowercase()) {
                let (key, _) = line.split_once(" =").unwrap_or((line, ""));
                assert!(
                    out.insert(key.to_owned(), BTreeSet::new()).is_none(),
                    "{key} twice in {}.ftl",
                    lang.code()
                );
                current = Some(key.to_owned());
            } else if !line.starts_with(' ') {
                current = None;
            }
            if let Some(k) = &current {
                let vars = out.entry(k.clone()).or_default();
                for piece in line.split('$').skip(1) {
                    let name: String = piece
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    vars.insert(name);
                }
            }
        }
        out
    }

    fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, ext, out);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }

    /// The person's templates (the staff console's, under `admin/`, stay English).
    fn person_templates() -> Vec<PathBuf> {
        let mut all = Vec::new();
        files(&repo().join("templates"), "html", &mut all);
        all.retain(|p| !p.components().any(|c| c.as_os_str() == "admin"));
        all
    }

    fn page_code() -> Vec<PathBuf> {
        let mut all = Vec::new();
        files(&repo().join("crates/pact-pages/src/web"), "rs", &mut all);
        all.push(repo().join("crates/pact-server/src/router.rs"));
        all
    }

    /// The keys of `t("…")`, `t1("…", …)`… calls in a file's text.
    fn called_keys(text: &str) -> Vec<String> {
        let mut keys = Vec::new();
        for (i, _) in text.match_indices("i18n::t") {
            let rest = &text[i + "i18n::t".len()..];
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            let Some(rest) = rest.strip_prefix('(') else {
                continue;
            };
            let rest = rest.trim_start();
            if let Some(lit) = rest.strip_prefix('"') {
                keys.push(lit.split('"').next().unwrap_or_default().to_owned());
            }
        }
        keys
    }

    #[test]
    fn every_key_is_translated_and_used() {
        for (lang, source) in SOURCES {
            if let Err((_, errors)) = FluentResource::try_new(source.to_owned()) {
                panic!("{}.ftl does not parse: {errors:?}", lang.code());
            }
        }
        let en = messages(Lang::En);
        assert!(en.len() > 100, "the English file looks empty");
        // The same keys in every language, each with the same variables.
        for lang in ALL {
            let other = messages(lang);
            let missing: Vec<_> = en.keys().filter(|k| !other.contains_key(*k)).collect();
            let extra: Vec<_> = other.keys().filter(|k| !en.contains_key(*k)).collect();
            assert!(
                missing.is_empty(),
                "missing in {}.ftl: {missing:?}",
                lang.code()
            );
            assert!(extra.is_empty(), "only in {}.ftl: {extra:?}", lang.code());
            for (k, vars) in &en {
                assert_eq!(
                    &other[k],
                    vars,
                    "{k}: other variables in {}.ftl",
                    lang.code()
                );
            }
        }
        // Every key the templates and the page code ask for exists …
        let mut sources = String::new();
        let mut called = BTreeSet::new();
        for path in person_templates().into_iter().chain(page_code()) {
            let text = std::fs::read_to_string(&path).unwrap();
            for k in called_keys(&text) {
                assert!(!k.is_empty(), "{}: a key must be a literal", path.display());
                called.insert(k);
            }
            sources.push_str(&text);
        }
        let unknown: Vec<_> = called.iter().filter(|k| !en.contains_key(*k)).collect();
        assert!(
            unknown.is_empty(),
            "keys used but not in the .ftl files: {unknown:?}"
        );
        // … and every key of the files is used somewhere.
        // (A key is used when it appears as a literal: in a call, or in a
        // constant or table that is passed to one.)
        let unused: Vec<_> = en
            .keys()
            .filter(|k| !sources.contains(&format!("\"{k}\"")))
            .collect();
        assert!(
            unused.is_empty(),
            "keys in the .ftl files that nothing uses: {unused:?}"
        );
        // Every key renders in every language without a Fluent error.
        for lang in ALL {
            for (k, vars) in &en {
                let args: Vec<(&str, Arg)> =
                    vars.iter().map(|v| (v.as_str(), Arg::Number(2))).collect();
                let text = lang.message(k, &args);
                assert!(!text.is_empty() && text != *k, "{k} in {}", lang.code());
            }
        }
    }

    /// No words are left in a person's template outside a message: after
    /// removing template tags and HTML tags, only punctuation remains, and no
    /// attribute a person reads (label, placeholder, alt, title) is fixed text.
    #[test]
    fn templates_hold_no_untranslated_text() {
        fn strip(text: &str, open: &str, close: &str) -> String {
            let mut out = String::new();
            let mut rest = text;
            while let Some(i) = rest.find(open) {
                out.push_str(&rest[..i]);
                rest = rest[i..]
                    .find(close)
                    .map_or("", |j| &rest[i + j + close.len()..]);
            }
            out.push_str(rest);
            out
        }
        for path in person_templates() {
            let text = std::fs::read_to_string(&path).unwrap();
            for attr in ["aria-label=\"", "placeholder=\"", "alt=\"", "title=\""] {
                for piece in text.split(attr).skip(1) {
                    let value = piece.split('"').next().unwrap_or_default();
                    let fixed = strip(value, "{{", "}}");
                    assert!(
                        fixed.chars().filter(|c| c.is_alphabetic()).count() == 0
                            || fixed == "BCDF-GHJK",
                        "{}: {attr}{value}",
                        path.display()
                    );
                }
            }
            let mut bare = strip(&text, "{#", "#}");
            bare = strip(&bare, "{%", "%}");
            bare = strip(&bare, "{{", "}}");
            bare = strip(&bare, "<", ">");
            let words: String = bare
                .split_whitespace()
                .filter(|w| w.chars().any(char::is_alphabetic))
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                words.is_empty(),
                "{}: untranslated text: {words}",
                path.display()
            );
        }
    }

    #[test]
    fn plural_forms_follow_the_number() {
        assert_eq!(
            Lang::En.message("ago-minutes", &[("n", Arg::Number(1))]),
            "1 minute ago"
        );
        assert_eq!(
            Lang::En.message("ago-minutes", &[("n", Arg::Number(3))]),
            "3 minutes ago"
        );
        assert_eq!(
            Lang::De.message("ago-minutes", &[("n", Arg::Number(1))]),
            "vor 1 Minute"
        );
        assert_eq!(
            Lang::De.message("ago-minutes", &[("n", Arg::Number(3))]),
            "vor 3 Minuten"
        );
    }
}
