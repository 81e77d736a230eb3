"""The figure's text above and between its panels, one definition for every format: the title,
the summary's lines and each panel's title, their sizes in logical px (`TITLE_PX`, …), their
fonts (`font`), painted with a QPainter (`paint_text`: PNG, PDF) or written as SVG text
(`svg_text`). The figure (`figure.Figure`) says what the text is and where (`title()`,
`lines`, `titles`)."""

from __future__ import annotations

from xml.sax.saxutils import escape

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter

HEADER_PX = 46  # title and a one-line summary above the panels; each wrapped line adds LINE_PX
TITLE_PX, SUBTITLE_PX, PANEL_TITLE_PX = 16, 11, 12
LINE_PX, MAX_SUMMARY_LINES = 15, 3
SVG_FONT = 'font-family="DejaVu Sans, Arial, Helvetica, sans-serif"'


def font(px: float, bold: bool = False) -> QFont:
    """A font `px` logical px high (at least 1)."""
    chosen = QFont()
    chosen.setPixelSize(max(1, round(px)))
    chosen.setBold(bold)
    return chosen


def paint_text(figure, painter: QPainter, width: float) -> None:
    """Paint `figure`'s title, summary lines and panel titles for a figure `width` logical px
    wide (the painter scaled to logical px)."""
    painter.setPen(QColor("#111"))
    title = font(TITLE_PX, bold=True)
    painter.setFont(title)
    text = QFontMetricsF(title).elidedText(figure.title(), Qt.ElideRight, width - 12)
    painter.drawText(QRectF(6, 2, width - 12, 22), Qt.AlignLeft | Qt.AlignVCenter, text)
    painter.setPen(QColor("#444"))
    painter.setFont(font(SUBTITLE_PX))
    for k, line in enumerate(figure.lines):
        box = QRectF(6, 24 + LINE_PX * k, width - 12, 18)
        painter.drawText(box, Qt.AlignLeft | Qt.AlignVCenter, line)
    painter.setPen(QColor("#111"))
    painter.setFont(font(PANEL_TITLE_PX, bold=True))
    for text, box in figure.titles:
        painter.drawText(box, Qt.AlignLeft | Qt.AlignVCenter, text)


def svg_text(figure, width: float) -> list[str]:
    """The same text as SVG `<text>` elements, for a figure `width` logical px wide."""
    title = QFontMetricsF(font(TITLE_PX, bold=True)).elidedText(
        figure.title(), Qt.ElideRight, width - 12
    )
    parts = [
        f'<text x="6" y="18" {SVG_FONT} font-size="{TITLE_PX}" font-weight="bold" '
        f'fill="#111111">{escape(title)}</text>\n'
    ]
    parts += [f'<text x="6" y="{37 + LINE_PX * k}" {SVG_FONT} font-size="{SUBTITLE_PX}" '
              f'fill="#444444">{escape(line)}</text>\n'
              for k, line in enumerate(figure.lines)]  # fmt: skip
    for text, box in figure.titles:
        y = box.y() + box.height() / 2 + PANEL_TITLE_PX * 0.35
        parts.append(
            f'<text x="{box.x():.1f}" y="{y:.1f}" {SVG_FONT} font-size="{PANEL_TITLE_PX}" '
            f'font-weight="bold" fill="#111111">{escape(text)}</text>\n'
        )
    return parts
