"""A tiny Sphinx extension for the bpe_nb docs: heading anchors as nbdev computes them.

nbdev links a backticked name such as `Tokenizer.encode` to `<page>.html#tokenizer.encode`, the
identifier pandoc (Quarto) gives the heading `### Tokenizer.encode` that `show_doc` writes. MyST's
default slugs drop the dot (`tokenizerencode`), so `_config.yml` sets `myst_heading_slug_func` to
`pandoc_slug` below and every nbdev link lands on its heading. tools/build_docs.py uses the same
function to check link anchors before Sphinx runs.
"""
import re

from docutils import nodes
from docutils.transforms import Transform

RAW_ANCHOR = re.compile(r'<a\s+(?:id|name)="([^"]+)"')


def pandoc_slug(title: str  # the heading text, as rendered (no markup)
               ) -> str:
    "Pandoc's auto identifier: lower case, keep letters, digits, `_-.`, spaces to `-`, start at a letter."
    s = re.sub(r"[^\w\s.-]", "", title.strip().lower())
    s = re.sub(r"\s+", "-", s)
    s = re.sub(r"^[\W\d_]+", "", s)
    return s or "section"


class RawAnchors(Transform):
    """Make `<a id="x"></a>` written in markdown a link target, like a heading: `[f](page.ipynb#x)` resolves.

    tools/build_docs.py puts such an anchor before each `#| exports` cell (the id the `show_doc` heading
    had), and references.ipynb marks its entries with them. MyST only knows heading slugs, so a link to
    another anchor would be a warning (an error under `-W`): this registers them as slugs too.
    """
    default_priority = 870   # before MyST's ResolveAnchorIds (879), which resolves `[x](#x)`

    def apply(self, **kwargs):
        slugs = getattr(self.document, "myst_slugs", None)
        if slugs is None: slugs = self.document.myst_slugs = {}
        env = self.document.settings.env if hasattr(self.document.settings, "env") else None
        for node in self.document.findall(nodes.raw):
            if "html" not in node.get("format", "").split(): continue
            for i in RAW_ANCHOR.findall(node.astext()):
                slugs.setdefault(i, (node.line or 0, i, i))
        if env is not None and slugs:
            env.metadata[env.docname]["myst_slugs"] = slugs


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    "Drop repeated inline scripts: sphinx-thebe and sphinx-togglebutton register theirs twice under Jupyter Book."
    seen, unique = set(), []
    for js in context.get("script_files", []):
        key = (str(getattr(js, "filename", js) or ""), getattr(js, "attributes", {}).get("body"))
        if key not in seen: seen.add(key); unique.append(js)
    context["script_files"][:] = unique   # a repeated `const THEBE_JS_URL` is a console SyntaxError


def setup(app):
    app.add_transform(RawAnchors)
    app.connect("html-page-context", _dedupe_scripts)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
