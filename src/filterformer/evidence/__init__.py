"""Evidence: the papers' claims tested by comparisons, published as one Markdown document.

A claims file (:mod:`.claims`) says which comparisons (``filterformer compare`` results
directories) test which claim, and which rows get a verdict. The document (:mod:`.document`)
reads each comparison's ``results.json`` (:mod:`.comparisons`), judges every row from compare's
paired difference (:mod:`.verdicts`, :mod:`.judged_rows`), with what its seeds could detect
(:mod:`.power`) and whether it was fixed before its results (:mod:`.history`), and writes per
claim the paper's figures beside ours, the setup (:mod:`.setup_text`), every method's results,
and the key figure (:mod:`.figures`). ``filterformer evidence`` is the command.
"""

from .claims import EXPECTATIONS, Claim, ClaimFigure, ClaimTest, Setting, load_claims, parse_claims
from .document import Evidence, evidence_command, render_document, write_document
from .history import ClaimsHistory
from .power import detectable_effect, seeds_needed
from .verdicts import OUTCOMES, claim_verdict, margin_verdict, row_verdict

__all__ = [
    "EXPECTATIONS",
    "OUTCOMES",
    "Claim",
    "ClaimFigure",
    "ClaimTest",
    "ClaimsHistory",
    "Evidence",
    "Setting",
    "claim_verdict",
    "detectable_effect",
    "evidence_command",
    "load_claims",
    "margin_verdict",
    "parse_claims",
    "render_document",
    "row_verdict",
    "seeds_needed",
    "write_document",
]
