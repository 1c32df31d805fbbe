//! The stylesheet and the script, embedded so the viewer works with no network.

/// The one stylesheet, served at [`STYLE_PATH`].
pub(crate) const STYLE: &str = include_str!("assets/view.css");
/// The one script, served at [`SCRIPT_PATH`].
pub(crate) const SCRIPT: &str = include_str!("assets/view.js");

/// Where the stylesheet is served. Versioned by the crate version so a browser cache never
/// pairs a new page with an old script.
pub(crate) const STYLE_PATH: &str = concat!("/assets/view-", env!("CARGO_PKG_VERSION"), ".css");
/// Where the script is served.
pub(crate) const SCRIPT_PATH: &str = concat!("/assets/view-", env!("CARGO_PKG_VERSION"), ".js");

/// The Content-Security-Policy every response carries: the page may load only its own script
/// and stylesheet and poll its own origin. No inline script or style runs, so recorded text
/// that slipped into markup could still not execute.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";
