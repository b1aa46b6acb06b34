//! The shell every page shares: language, viewport, the stylesheet and the deferred script.

use maud::{html, Markup, DOCTYPE};

use crate::assets::{SCRIPT_PATH, STYLESHEET_PATH};

/// A whole document: `title` in the tab and as the `h1`, `lead` under it, then `body`.
pub(crate) fn document(title: &str, lead: Markup, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · exitvoice" }
                link rel="stylesheet" href=(STYLESHEET_PATH);
                script src=(SCRIPT_PATH) defer {}
            }
            body {
                header {
                    h1 { (title) }
                    p { (lead) }
                }
                main { (body) }
                footer {
                    p.note { "exitvoice " (env!("CARGO_PKG_VERSION")) }
                }
            }
        }
    }
}
