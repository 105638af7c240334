//! A QR code of the verification link, for the terminal (RFC 8628 §3.3.1:
//! `verification_uri_complete` "may be displayed as a QR code").

use qrcode::QrCode;
use qrcode::render::unicode::Dense1x2;

/// The QR code of `text` drawn with half-block characters, light on dark
/// so it scans on dark and light terminals alike (with its quiet zone).
/// `None` when the text does not fit in a QR code.
pub fn render(text: &str) -> Option<String> {
    let code = QrCode::new(text.as_bytes()).ok()?;
    Some(
        code.render::<Dense1x2>()
            .dark_color(Dense1x2::Light)
            .light_color(Dense1x2::Dark)
            .quiet_zone(true)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_link_renders_as_block_characters() {
        let q = super::render("https://p.example/device?user_code=BCDF-GHJK");
        let q = q.unwrap_or_default();
        assert!(q.lines().count() > 10);
        assert!(q.chars().any(|c| c == '█' || c == '▀' || c == '▄'));
    }
}
