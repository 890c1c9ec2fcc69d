// WCAG 2 contrast of every text the browser rendered (tests/report/conftest.py: contrast_failures).
// HTML text: its colour (alpha and ancestors' opacity composited) on the nearest opaque background
// (translucent layers composited). SVG text: on what is painted under its centre (the filled rects
// before it in document order, over the SVG's background). 4.5:1; 3:1 for 24 px or 18.66 px bold.
(() => {
  const parse = c => { const m = /rgba?\(([^)]+)\)/.exec(c || ""); if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, bot) => { const a = top[3]; return [0, 1, 2].map(i => top[i] * a + bot[i] * (1 - a)).concat([1]); };
  const lum = c => { const f = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const bgOf = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let bg = [255, 255, 255, 1]; for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg); return bg; };
  const opacity = el => { let o = 1; for (let e = el; e; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity); return o; };
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  const ownText = el => Array.from(el.childNodes).filter(n => n.nodeType === 3).map(n => n.textContent).join("").trim();
  const bad = []; let checked = 0;
  const judge = (el, fgRaw, bg, where) => {
    const fg0 = parse(fgRaw); if (!fg0) return;
    const fg = over([fg0[0], fg0[1], fg0[2], fg0[3] * opacity(el)], bg);
    const s = getComputedStyle(el), size = parseFloat(s.fontSize), bold = parseInt(s.fontWeight, 10) >= 700;
    const need = size >= 24 || (size >= 18.66 && bold) ? 3 : 4.5, r = ratio(fg, bg); checked++;
    if (r < need) bad.push({text: ownText(el).slice(0, 40), fg: fgRaw, bg: "rgb(" + bg.slice(0, 3).map(Math.round) + ")",
                            ratio: Math.round(r * 100) / 100, need: need, where: where + " " + (el.getAttribute("class") || "")});
  };
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest("svg, script, style, title, option, select") || !ownText(el) || !visible(el)) continue;
    judge(el, getComputedStyle(el).color, bgOf(el), el.tagName.toLowerCase());
  }
  for (const t of document.querySelectorAll("svg text")) {
    if (!ownText(t) || !visible(t)) continue;
    // what is painted under the text's centre: the last filled rect before it in document order
    const box = t.getBoundingClientRect(), x = box.left + box.width / 2, y = box.top + box.height / 2;
    let bg = bgOf(t.closest("svg"));
    for (const r of t.closest("svg").querySelectorAll("rect")) {
      if (!(r.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING)) continue;
      const b = r.getBoundingClientRect(), fill = parse(getComputedStyle(r).fill);
      if (fill && fill[3] > 0 && x >= b.left && x <= b.right && y >= b.top && y <= b.bottom) bg = over(fill, bg);
    }
    judge(t, getComputedStyle(t).fill, bg, "svg-text");
  }
  return {checked: checked, bad: bad};
})()
