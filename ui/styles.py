"""The page's CSS: the cards' styles travel with their HTML block (scoped ``css_template``), the rest is given
at ``launch()``, which is where Gradio 6 takes theme and page CSS."""

import gradio as gr

CARD_CSS = """
.qa-cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(290px, 1fr)); gap: 14px; }
.qa-card { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 14px 16px;
  background: var(--block-background-fill); display: flex; flex-direction: column; gap: 8px; }
.qa-card.qa-headline { border-top: 4px solid #ea580c; }
.qa-card[data-variant="baseline"] { border-top-color: #9ca3af; }
.qa-card.qa-error { border-color: #dc2626; border-top-width: 4px; }
.qa-card.qa-running { opacity: 0.65; }
.qa-head { display: flex; justify-content: space-between; align-items: baseline; gap: 8px; min-width: 0; }
.qa-title { font-weight: 700; font-size: 0.98em; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  min-width: 0; }
.qa-role { flex-shrink: 0; font-size: 0.72em; padding: 1px 7px; border-radius: 999px; cursor: help;
  background: var(--background-fill-secondary); color: var(--body-text-color-subdued); }
.qa-guess { font-size: 0.95em; }
.qa-latency-only { align-self: flex-start; font-size: 0.78em; font-weight: 600; padding: 1px 8px; border-radius: 999px;
  background: #fef3c7; color: #92400e; cursor: help; }
.qa-answer { font-size: 1.35em; font-weight: 700; min-height: 1.4em; overflow-wrap: anywhere; }
.qa-answer.qa-none { color: var(--body-text-color-subdued); font-style: italic; }
.qa-answer.qa-pending { font-size: 1em; font-weight: 400; color: var(--body-text-color-subdued); }
.qa-snippet { font-size: 0.85em; line-height: 1.45; color: var(--body-text-color-subdued); overflow-wrap: anywhere; }
.qa-snippet mark { background: #fde68a; color: #111827; padding: 0 2px; border-radius: 3px; font-weight: 600; }
.qa-metrics { display: grid; grid-template-columns: repeat(6, 1fr); gap: 6px; }
.qa-metric { grid-column: span 2; }
.qa-metric.qa-key, .qa-metric.qa-speed { grid-column: span 3; }
.qa-metric[title], .qa-runtime[title] { cursor: help; }
.qa-metric { display: flex; flex-direction: column; padding: 6px 8px; border-radius: 6px;
  background: var(--background-fill-secondary); }
.qa-metric b { font-size: 1.05em; }
.qa-metric span { font-size: 0.72em; color: var(--body-text-color-subdued); }
.qa-metric.qa-key b, .qa-metric.qa-speed b { font-size: 1.3em; }
.qa-metric.qa-good b { color: var(--qa-good-text); }
.qa-runtime { font-family: var(--font-mono); font-size: 0.78em; color: var(--body-text-color-subdued); }
.qa-note { font-size: 0.78em; color: var(--qa-warn-text); }
.qa-error { color: var(--qa-bad-text); overflow-wrap: anywhere; font-size: 0.9em; }
"""
BANNER_CSS = """
.qa-summary { font-size: 1.05em; padding: 10px 14px; border-radius: 8px; background: var(--background-fill-secondary); }
.qa-input-notice { padding: 6px 12px; border-radius: 8px; border: 1px solid #f59e0b; background: #fffbeb;
  color: #78350f; margin-bottom: 6px; }
.qa-busy { color: var(--qa-warn-text); }
.qa-muted { color: var(--body-text-color-subdued); }
.qa-agree { font-size: 0.88em; color: var(--body-text-color-subdued); }
.qa-notice { padding: 10px 14px; border-radius: 8px; border: 1px solid #f59e0b; background: #fffbeb; color: #78350f;
  margin-bottom: 8px; overflow-wrap: anywhere; }
.qa-notice details { margin-top: 4px; font-size: 0.9em; }
.qa-notice summary { cursor: pointer; }
.qa-record { font-size: 0.92em; line-height: 1.6; }
.qa-scroll { overflow-x: auto; }
.qa-term { text-decoration: underline dotted; text-underline-offset: 3px; cursor: help; }
#bench-headline { margin-bottom: 8px; }
.qa-about { width: 100%; border-collapse: collapse; font-size: 0.9em; }
.qa-about th, .qa-about td { border-bottom: 1px solid var(--border-color-primary); padding: 6px 8px; text-align: left;
  vertical-align: top; }
.qa-bad { color: var(--qa-bad-text); }
.qa-ok { padding: 10px 14px; border-radius: 8px; border: 1px solid #16a34a; background: #f0fdf4; color: #14532d;
  overflow-wrap: anywhere; }
"""
PAGE_CSS = """
.gradio-container { max-width: 1400px !important; }
/* A one-line box as tall as its text, placeholder included: on a phone the question's placeholder wraps to two
   lines, of which a one-row box showed one and a half (browsers without field-sizing keep the one row). */
.gradio-container textarea[rows="1"] { field-sizing: content; width: 100%; }
/* A record's name longer than its chooser ends in an ellipsis before the chevron, not under it. */
#bench-record input { text-overflow: ellipsis; padding-right: 28px; }
/* A table's block (ui/tables.py) gives its width to the table: Gradio's 12 px a side left a phone 302 px of it,
   short of the name and three numbers (320 px). */
.qa-table-block .html-container { padding-left: 0; padding-right: 0; }
/* Wider than a phone, a table's columns take the room their words need (a name on one line where there is room):
   the fixed widths are a phone's. */
@media (min-width: 720px) {
  .qa-table-block table.qa-table { table-layout: auto !important; width: auto !important; }
  .qa-table-block table.qa-table col { width: auto !important; }
}
/* On a phone the four tabs fit on one line with less padding (Gradio's 16 px a side put "Your questions" and
   "About" under a "···" menu at 390 px; with 4 px they fit down to 360 px). */
@media (max-width: 480px) { .tab-container button { padding: 0 6px; } }
@media (max-width: 370px) { .tab-container button { padding: 0 4px; } }
/* Visible keyboard focus (WCAG 2.4.7, a 3:1 ring): Soft shows a focused text box by a faint shadow only and the
   slider not at all (its components say outline: none, hence !important); the results Ask moves focus to, and the
   app's scrollable tables, get the same ring. */
.gradio-container textarea:focus-visible, .gradio-container input:focus-visible, #qa-summary:focus,
#qa-cards:focus-visible, .qa-scroll:focus-visible {
  outline: 3px solid var(--qa-focus-ring) !important; outline-offset: 2px; }
"""


def fixed_widths(headers, first: str = "108px", default: str = "72px", wider: dict[str, str] | None = None):
    """Fixed column widths for a table whose ``headers`` are short words: the first (a name) ``first``, a header
    in ``wider`` its own, the rest ``default``. Fixed, so that a phone scrolls the numbers sideways beside the
    pinned name and a header wraps between words, never within one (Gradio's own widths broke "tokens")."""
    wider = wider or {}
    return [first if i == 0 else wider.get(h, default) for i, h in enumerate(headers)]


def theme() -> gr.themes.Base:
    """Gradio's Soft theme with colors that meet WCAG AA (4.5:1 for text): Soft's subdued text (gray-400, 2.4:1 on
    its gray page; the cards' captions, the info lines under each control), its labels (indigo-500 on indigo-100,
    3.6:1) and its white on indigo-500 buttons and ticked radios (4.46:1) are each made darker by a step or two; dark
    mode gets its own values where Soft's fail (links, placeholders; the chosen tab in :data:`APP_COLORS`, with the
    app's own colors). docs/accessibility.md says how it is checked."""
    return gr.themes.Soft().set(
        body_text_color_subdued="*neutral_600",
        color_accent="*primary_600",  # the chosen tab's name
        block_label_text_color="*primary_700",
        block_title_text_color="*primary_700",
        button_primary_background_fill="*primary_600",
        button_primary_background_fill_hover="*primary_700",
        checkbox_label_background_fill_selected="*primary_600",
        checkbox_label_background_fill_selected_dark="*primary_700",
        input_border_color_focus="*primary_700",
        input_placeholder_color="*neutral_500",  # placeholders are text too (axe does not check them): 4.8:1
        input_placeholder_color_dark="*neutral_300",  # on the dark boxes' gray-700 (Soft: gray-500, 2.1:1)
        link_text_color_dark="*secondary_300",  # the download links (indigo-500 on the dark page: 4.0:1)
        link_text_color_hover_dark="*secondary_200",
        link_text_color_visited_dark="*secondary_300",
        link_text_color_active_dark="*secondary_300",
    )


# The app's own text colors, light and dark (Gradio puts ``dark`` on <body>): each 4.5:1 at least on the page's and
# the cards' backgrounds in its mode (amber-700, green-700, red-600 on white and gray-50; amber-400, green-400, red-400
# on gray-800 and gray-900), and the focus ring 3:1 at least.
APP_COLORS = """
:root { --qa-focus-ring: #4338ca; --qa-warn-text: #b45309; --qa-good-text: #15803d; --qa-bad-text: #dc2626; }
.dark { --qa-focus-ring: #a5b4fc; --qa-warn-text: #fbbf24; --qa-good-text: #4ade80; --qa-bad-text: #f87171; }
/* the chosen tab's name is the theme's accent, which has no dark value: indigo-600 on the dark page is 3.1:1 */
.dark button[role="tab"][aria-selected="true"] { color: #a5b4fc; }
"""


def launch_style() -> dict:
    """Page-wide theme and CSS, which Gradio 6 takes at launch() (the cards' styles travel with them)."""
    return {"theme": theme(), "css": APP_COLORS + PAGE_CSS}


def html_block(value: str = "", css: str = BANNER_CSS, js_on_load: str | None = None, **kwargs) -> gr.HTML:
    """An HTML block whose (scoped) styles travel with it, so build_demo() needs nothing at launch; ``js_on_load``
    runs once when the page builds it (none by default: Gradio's default turns a click into an event)."""
    return gr.HTML(value, css_template=css, js_on_load=js_on_load, **kwargs)
