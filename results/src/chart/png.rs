//! A chart's SVG as PNG, rendered by resvg with the text in a system font, so
//! that the PNG shows what a browser shows.

use std::sync::{Arc, OnceLock};

use resvg::usvg::{self, fontdb};

/// Families tried, in order, for the charts' `sans-serif`.
const SANS: [&str; 5] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "Arial",
    "Helvetica",
];

/// The system's fonts, read once, `sans-serif` mapped to the first family of
/// [`SANS`] found (else to any family there is); `None` without fonts.
fn fonts() -> Option<Arc<fontdb::Database>> {
    static FONTS: OnceLock<Option<Arc<fontdb::Database>>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = fontdb::Database::new();
            db.load_system_fonts();
            let has = |name: &str| {
                db.faces()
                    .any(|f| f.families.iter().any(|(n, _)| n == name))
            };
            let family = SANS
                .iter()
                .find(|f| has(f))
                .map(|f| (*f).to_owned())
                .or_else(|| {
                    db.faces()
                        .next()
                        .and_then(|f| f.families.first())
                        .map(|f| f.0.clone())
                })?;
            db.set_sans_serif_family(family);
            Some(Arc::new(db))
        })
        .clone()
}

/// Renders `svg` as PNG bytes at its own size.
pub fn from_svg(svg: &str) -> Result<Vec<u8>, String> {
    let fonts = fonts().ok_or(
        "no font on this system for the PNG's text (install one: apt-get install fonts-dejavu-core); the SVG is written",
    )?;
    let opt = usvg::Options {
        fontdb: fonts,
        ..Default::default()
    };
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("the chart's SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| format!("a {}x{} image", size.width(), size.height()))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| e.to_string())
}

/// `path`'s PNG beside it: `chart.svg` -> `chart.png`.
pub fn beside(path: &std::path::Path) -> std::path::PathBuf {
    path.with_extension("png")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_svg_renders_at_its_size_with_its_text() {
        let blank = r#"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="white"/></svg>"#;
        let text = r#"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="white"/><text x="2" y="15" font-family="sans-serif" font-size="14">Ag</text></svg>"#;
        if fonts().is_none() {
            eprintln!("skipped: no system font");
            return;
        }
        let (a, b) = (from_svg(blank).unwrap(), from_svg(text).unwrap());
        assert_eq!(&a[1..4], b"PNG");
        // IHDR: width and height, big-endian, at bytes 16..24.
        assert_eq!(&a[16..24], &[0, 0, 0, 40, 0, 0, 0, 20]);
        // The text's pixels make the image another (and less compressible) one.
        assert_ne!(a, b);
        assert!(b.len() > a.len());
        assert!(from_svg("<svg").is_err());
    }
}
