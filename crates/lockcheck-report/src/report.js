"use strict";
// The report's timeline: decodes the embedded columns into typed arrays once, then
// draws on canvases. Zoomed out it aggregates per pixel (held time, write density),
// zoomed in it draws every call; nothing is one DOM node per op, so a million-op
// history stays responsive. After each draw it writes data-* markers on <body>
// (timeline, mode, visible-calls, fault-bands) that the browser test reads.
(function () {
  const started = performance.now();
  const D = JSON.parse(document.getElementById("lc-data").textContent);
  // Codes of check/calls.rs CallKind (acquire, renew, release, write, read, other) and
  // Outcome (ok, fail, stale-token rejected, info, withheld by self-fencing).
  const F_ACQUIRE = 0, F_RENEW = 1, F_WRITE = 3, F_READ = 4;
  const O_OK = 0, O_STALE = 2, O_INFO = 3;
  const DETAIL_LIMIT = 3000, GUTTER = 64, RIGHT = 10;

  function cumsum(a) { const r = new Float64Array(a.length); let p = 0; for (let i = 0; i < a.length; i++) { p += a[i]; r[i] = p; } return r; }
  // Shifted deltas (see timeline.rs): 0 = none, v > 0 = previous + v - 1, v < 0 = previous + v.
  function unshift(a) { const r = new Float64Array(a.length); let p = 0; for (let i = 0; i < a.length; i++) { const v = a[i]; if (v === 0) { r[i] = NaN; continue; } p += v > 0 ? v - 1 : v; r[i] = p; } return r; }
  function lowerBound(arr, x, lo, hi) { while (lo < hi) { const m = (lo + hi) >>> 1; if (arr[m] < x) lo = m + 1; else hi = m; } return lo; }

  // Columns arrive as strings of variable-length integers (timeline.rs encode_varints):
  // zigzag, 5 bits per character, bit 5 set = more follow.
  const DIGIT = new Uint8Array(128);
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".split("").forEach((c, i) => { DIGIT[c.charCodeAt(0)] = i; });
  function varints(str) {
    const out = new Float64Array(str.length);
    let n = 0, v = 0, mul = 1;
    for (let i = 0; i < str.length; i++) {
      const c = DIGIT[str.charCodeAt(i)];
      v += (c & 31) * mul;
      if (c & 32) { mul *= 32; continue; }
      out[n++] = v % 2 === 0 ? v / 2 : -(v + 1) / 2;
      v = 0; mul = 1;
    }
    return out.subarray(0, n);
  }
  const C = {}, S = {};
  for (const k in D.calls) C[k] = varints(D.calls[k]);
  for (const k in D.sections) S[k] = varints(D.sections[k]);
  S.c = cumsum(S.c);
  for (let j = 0; j < S.c.length; j++) S.r[j] = S.r[j] === 0 ? -1 : S.c[j] + S.r[j];
  const N = C.lane.length, nLanes = Math.max(1, D.lanes.length);
  const lane = Uint32Array.from(C.lane), fk = Uint8Array.from(C.f), oc = Uint8Array.from(C.o);
  const t0 = cumsum(C.t0), t1 = new Float64Array(N), ix = cumsum(C.ix);
  const tok = unshift(C.tok), seq = unshift(C.seq);
  const END = Math.max(D.end_us, 1);
  // maxDur bounds how far before the view a call in view may start; calls that never
  // completed (they last to the end) are kept apart so that one cannot make it the whole run.
  let maxDur = 0;
  const openCalls = [];
  for (let i = 0; i < N; i++) {
    const d = C.d[i];
    if (d < 0) { t1[i] = NaN; openCalls.push(i); } else { t1[i] = t0[i] + d; if (d > maxDur) maxDur = d; }
  }
  const M = S.c.length;
  const sS = new Float64Array(M), sE = new Float64Array(M), sLe = new Float64Array(M), sZ = new Float64Array(M), sLane = new Uint32Array(M);
  let maxSec = 0;
  for (let j = 0; j < M; j++) {
    const a = S.c[j];
    sS[j] = isNaN(t1[a]) ? t0[a] : t1[a];
    sE[j] = sS[j] + S.e[j];
    sLe[j] = S.le[j] < 0 ? NaN : sS[j] + S.le[j];
    sZ[j] = S.z[j] < 0 ? NaN : sS[j] + S.z[j];
    sLane[j] = lane[a];
    if (S.e[j] > maxSec) maxSec = S.e[j];
  }
  document.body.dataset.decodeMs = (performance.now() - started).toFixed(0);
  // What was decoded, for the browser test to compare with the history.
  let maxTok = -1;
  for (let i = 0; i < N; i++) if (tok[i] > maxTok) maxTok = tok[i];
  Object.assign(document.body.dataset, { calls: String(N), sections: String(M), lastInvoke: String(N ? ix[N - 1] : -1), maxToken: String(maxTok) });

  let v0 = 0, v1 = END;
  let highlight = new Set(), hiFaults = new Set();
  let mode = "aggregate";

  const cvT = document.getElementById("lc-timeline"), cvL = document.getElementById("lc-latency"), cvQ = document.getElementById("lc-throughput");
  const tip = document.getElementById("lc-tip");
  const laneH = Math.max(6, Math.min(44, Math.floor(520 / nLanes)));
  const TOP = 18, AXIS = 20;

  function setup(cv, cssH) {
    const w = Math.max(300, cv.parentElement.clientWidth - 2), dpr = window.devicePixelRatio || 1;
    cv.width = Math.round(w * dpr); cv.height = Math.round(cssH * dpr);
    cv.style.height = cssH + "px";
    const ctx = cv.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, cssH);
    return { ctx, w, h: cssH, pw: w - GUTTER - RIGHT };
  }
  function X(t, g) { return GUTTER + (t - v0) / (v1 - v0) * g.pw; }
  function T(x, g) { return v0 + (x - GUTTER) / g.pw * (v1 - v0); }
  function fmtT(us) {
    const span = v1 - v0, s = us / 1e6;
    const dec = span < 2e3 ? 6 : span < 2e5 ? 4 : span < 2e7 ? 2 : 1;
    return s.toFixed(dec) + " s";
  }
  function fmtDur(us) { return us < 1000 ? us.toFixed(0) + " µs" : us < 1e6 ? (us / 1000).toFixed(1) + " ms" : (us / 1e6).toFixed(2) + " s"; }

  function drawBands(g, top, bottom, labels) {
    const { ctx } = g;
    let drawn = 0;
    ctx.save();
    ctx.beginPath(); ctx.rect(GUTTER, 0, g.pw, g.h); ctx.clip();
    D.faults.forEach((f, k) => {
      if (f.e < v0 || f.s > v1) return;
      const a = X(f.s, g), b = Math.max(X(f.e, g), a + 2);
      ctx.globalAlpha = hiFaults.has(k) ? 0.34 : 0.18;
      ctx.fillStyle = f.c;
      ctx.fillRect(a, top, b - a, bottom - top);
      ctx.globalAlpha = 1;
      if (labels) {
        ctx.fillStyle = f.c;
        ctx.fillRect(a, 0, b - a, 4);
        ctx.fillStyle = "#374151"; ctx.font = "11px system-ui, sans-serif";
        if (b - a > 30 || drawn < 40) ctx.fillText(f.label, Math.max(a, GUTTER) + 2, 14);
      }
      drawn++;
    });
    ctx.restore();
    return drawn;
  }

  function axis(g, y) {
    const { ctx } = g, span = v1 - v0;
    const raw = span / Math.max(1, g.pw / 110), p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || raw;
    ctx.fillStyle = "#6b7280"; ctx.strokeStyle = "#e5e7eb"; ctx.font = "11px system-ui, sans-serif";
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = X(t, g);
      ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y + 4); ctx.stroke();
      ctx.fillText(fmtT(t), x - 18, y + 15);
    }
  }

  function visibleCalls() { return [lowerBound(t0, v0 - maxDur, 0, N), lowerBound(t0, v1 + 1e-6, 0, N)]; }
  function visibleSections() { return [lowerBound(sS, v0 - maxSec, 0, M), lowerBound(sS, v1 + 1e-6, 0, M)]; }

  function drawTimeline() {
    const g = setup(cvT, TOP + nLanes * laneH + AXIS), { ctx } = g;
    const bottom = TOP + nLanes * laneH;
    for (let l = 0; l < nLanes; l++) {
      ctx.fillStyle = l % 2 ? "#f9fafb" : "#ffffff";
      ctx.fillRect(GUTTER, TOP + l * laneH, g.pw, laneH);
    }
    const bands = drawBands(g, TOP, bottom, true);
    const [lo, hi] = visibleCalls(), [slo, shi] = visibleSections();
    mode = hi - lo <= DETAIL_LIMIT ? "detail" : "aggregate";
    accumulate(g, lo, hi, slo, shi);
    ctx.save(); ctx.beginPath(); ctx.rect(GUTTER, TOP, g.pw, bottom - TOP); ctx.clip();
    const drawn = mode === "detail" ? detail(g, lo, hi, slo, shi) : aggregate(g, P);
    drawHighlights(g);
    ctx.restore();
    ctx.fillStyle = "#374151"; ctx.font = Math.min(12, laneH - 1) + "px system-ui, sans-serif";
    if (laneH >= 8) D.lanes.forEach((ps, l) => ctx.fillText("p" + ps[0][0] + (ps.length > 1 ? " +" + (ps.length - 1) : ""), 6, TOP + l * laneH + laneH * 0.72));
    // Where a lane passes to a worker's next process id (after an info), name it.
    if (mode === "detail" && laneH >= 14) {
      ctx.fillStyle = "#6b7280"; ctx.font = "10px system-ui, sans-serif";
      D.lanes.forEach((ps, l) => ps.forEach(([p, t], k) => {
        if (k === 0 || t < v0 || t > v1) return;
        const x = X(t, g);
        ctx.fillRect(x, TOP + l * laneH, 1, laneH); ctx.fillText("p" + p, x + 2, TOP + (l + 1) * laneH - 2);
      }));
    }
    axis(g, bottom);
    const b = document.body.dataset;
    b.timeline = "drawn"; b.mode = mode; b.visibleCalls = String(hi - lo); b.faultBands = String(bands); b.drawn = String(drawn);
  }

  function laneY(l) { return TOP + l * laneH; }
  function processAt(l, t) { const ps = D.lanes[l]; let p = ps[0][0]; for (const [q, s] of ps) if (s <= t) p = q; return p; }
  // A lane: write labels on top (when there is room), the section bar below, the lease under it.
  function barH() { return Math.max(3, laneH * (laneH >= 20 ? 0.42 : 0.6)); }
  function barY(y) { return laneH >= 20 ? y + laneH * 0.36 : y + (laneH - barH()) / 2; }

  function detail(g, lo, hi, slo, shi) {
    const { ctx } = g, bh = barH(), small = Math.max(2, bh * 0.35);
    let drawn = 0;
    for (let j = slo; j < shi; j++) {
      if (sE[j] < v0) continue;
      drawn++;
      const y = laneY(sLane[j]), yb = barY(y), ym = yb + bh / 2;
      const a = S.c[j], r = S.r[j];
      // Acquire and release windows (invoke .. ok): when the grant or the release may have happened.
      ctx.fillStyle = "#bfdbfe";
      ctx.fillRect(X(t0[a], g), ym - small / 2, Math.max(1, X(sS[j], g) - X(t0[a], g)), small);
      const xs = X(sS[j], g), xe = Math.max(X(sE[j], g), xs + 1);
      ctx.fillStyle = "#2563eb"; ctx.fillRect(xs, yb, xe - xs, bh);
      if (!isNaN(sZ[j])) { const xz = X(sZ[j], g); ctx.fillStyle = "#ea580c"; ctx.fillRect(xz, yb, xe - xz, bh); }
      if (r >= 0) {
        const re = isNaN(t1[r]) ? END : t1[r];
        ctx.fillStyle = oc[r] === O_OK ? "#bfdbfe" : "#fca5a5";
        ctx.fillRect(X(t0[r], g), ym - small / 2, Math.max(1, X(re, g) - X(t0[r], g)), small);
      }
      // The lease as the server granted it (acquire or renew ok + lease_ms).
      if (!isNaN(sLe[j])) {
        ctx.strokeStyle = "#1e3a8a"; ctx.setLineDash([3, 2]); ctx.beginPath();
        ctx.moveTo(xs, yb + bh + 1.5); ctx.lineTo(X(sLe[j], g), yb + bh + 1.5); ctx.stroke(); ctx.setLineDash([]);
      }
      if (xe - xs > 34 && !isNaN(tok[a]) && laneH >= 12) {
        ctx.fillStyle = "#fff"; ctx.font = "10px system-ui, sans-serif";
        ctx.fillText("t" + tok[a], xs + 3, yb + bh - 2);
      }
    }
    const lastLabel = new Float64Array(nLanes).fill(-1e9);
    for (let i = lo; i < hi; i++) drawn += drawCall(g, i, lastLabel);
    for (const i of openCalls) if (i < lo) drawn += drawCall(g, i, lastLabel);
    return drawn;
  }

  // One call in detail: a write tick (with seq and token), a read or renew mark, an
  // acquire attempt that did not get the lock. Returns 1 if drawn.
  function drawCall(g, i, lastLabel) {
    const { ctx } = g;
    const e = isNaN(t1[i]) ? END : t1[i];
    if (e < v0) return 0;
    const y = laneY(lane[i]), f = fk[i], o = oc[i];
    if (f === F_WRITE) {
      const x = X(e, g);
      ctx.strokeStyle = o === O_OK ? "#15803d" : o === O_STALE ? "#dc2626" : o === O_INFO ? "#7c3aed" : "#9ca3af";
      ctx.lineWidth = 2; ctx.beginPath(); ctx.moveTo(x, y + (laneH >= 20 ? 12 : 1)); ctx.lineTo(x, y + laneH - 1); ctx.stroke(); ctx.lineWidth = 1;
      if (o === O_STALE) {
        const s = Math.min(5, laneH / 3), cy = y + laneH / 2;
        ctx.beginPath(); ctx.moveTo(x - s, cy - s); ctx.lineTo(x + s, cy + s); ctx.moveTo(x + s, cy - s); ctx.lineTo(x - s, cy + s); ctx.stroke();
      }
      if (laneH >= 20) {
        ctx.font = "10px system-ui, sans-serif";
        const label = (isNaN(seq[i]) ? "" : "#" + seq[i] + " ") + (isNaN(tok[i]) ? "" : "t" + tok[i]) + (o === O_STALE ? " rejected" : "");
        const w = ctx.measureText(label).width;
        if (x - w / 2 > lastLabel[lane[i]] + 3) {
          ctx.fillStyle = o === O_STALE ? "#b91c1c" : "#14532d";
          ctx.fillText(label, x - w / 2, y + 10);
          lastLabel[lane[i]] = x + w / 2;
        }
      }
    } else if (f === F_READ) {
      ctx.fillStyle = "#6b7280"; ctx.fillRect(X(e, g) - 0.5, y + laneH * 0.3, 1.5, laneH * 0.4);
    } else if (f === F_RENEW && o === O_OK) {
      ctx.fillStyle = "#0e7490"; ctx.fillRect(X(e, g) - 1, y + 1, 2, laneH * 0.3);
    } else if (f === F_ACQUIRE && o !== O_OK) {
      ctx.fillStyle = o === O_INFO ? "#7c3aed" : "#d1d5db";
      ctx.fillRect(X(t0[i], g), y + laneH / 2 - 1, Math.max(2, X(e, g) - X(t0[i], g)), 2);
    }
    return 1;
  }

  // Aggregated lanes: a bar wherever a section was held in the pixel, write density as
  // tick height above it (log scale), rejected writes as red marks.
  function aggregate(g, P) {
    const { ctx } = g, W = P.W;
    let wMax = 1;
    for (let k = 0; k < P.w.length; k++) if (P.w[k] > wMax) wMax = P.w[k];
    const bh = barH(), lw = Math.log(1 + wMax);
    let drawn = 0;
    for (let l = 0; l < nLanes; l++) {
      const y = laneY(l), yb = barY(y), base = l * W;
      // One path per colour and lane: thousands of rects, one fill each.
      for (const [arr, color] of [[P.held, "#2563eb"], [P.zomb, "#ea580c"]]) {
        ctx.fillStyle = color; ctx.beginPath();
        let run = -1;
        for (let p = 0; p <= W; p++) {
          const on = p < W && arr[base + p] > 0;
          if (on && run < 0) run = p;
          else if (!on && run >= 0) { ctx.rect(GUTTER + run, yb, p - run, bh); run = -1; drawn++; }
        }
        ctx.fill();
      }
      ctx.fillStyle = "#15803d"; ctx.beginPath();
      for (let p = 0; p < W; p++) {
        const n = P.w[base + p];
        // Above the bar, so that the held time stays visible under dense writes.
        if (n) { drawn++; const hgt = Math.max(1, (yb - y - 1) * Math.log(1 + n) / lw); ctx.rect(GUTTER + p, yb - hgt, 1, hgt); }
      }
      ctx.fill();
      ctx.fillStyle = "#dc2626"; ctx.beginPath();
      for (let p = 0; p < W; p++) if (P.rej[base + p]) ctx.rect(GUTTER + p - 1, y, 2, laneH);
      ctx.fill();
    }
    return drawn;
  }

  // Per-pixel figures of the view, for the aggregated lanes and both charts: one pass
  // over the calls in view, or, when the view holds far more calls than pixels, over
  // a pyramid of time bins built once (so a million-op history redraws in milliseconds).
  const P = { W: 0 };
  const LANE_KEYS = ["held", "zomb", "w", "rej"], KEYS = ["aMax", "aSum", "aN", "wMax", "wSum", "wN", "ok", "st"];
  function pixelArrays(W) {
    if (P.W !== W) {
      P.W = W;
      P.held = new Float32Array(nLanes * W); P.zomb = new Float32Array(nLanes * W);
      P.w = new Uint32Array(nLanes * W); P.rej = new Uint32Array(nLanes * W);
      for (const k of KEYS) P[k] = new Float64Array(W);
    } else {
      for (const k of LANE_KEYS.concat(KEYS)) P[k].fill(0);
    }
    return P;
  }
  // Adds one call's figures to slot k (lane slot kl) of a pixel or bin set.
  function addCall(A, k, kl, i) {
    const f = fk[i], o = oc[i];
    if (f === F_WRITE) { if (o === O_STALE) A.rej[kl]++; else if (o === O_OK) A.w[kl]++; }
    if (o === O_OK) A.ok[k]++; else if (o === O_STALE) A.st[k]++;
    if (o !== O_OK || isNaN(t1[i])) return;
    const d = Math.max(1, t1[i] - t0[i]);
    if (f === F_ACQUIRE) { if (d > A.aMax[k]) A.aMax[k] = d; A.aSum[k] += d; A.aN[k]++; }
    else if (f === F_WRITE) { if (d > A.wMax[k]) A.wMax[k] = d; A.wSum[k] += d; A.wN[k]++; }
  }
  // Adds held time [a, b] of lane l to slots of width bw (µs) starting at t = origin.
  function addSpan(arr, nb, l, a, b, origin, bw) {
    const ka = Math.max(0, Math.floor((a - origin) / bw)), kb = Math.min(nb - 1, Math.floor((b - origin) / bw));
    for (let k = ka; k <= kb; k++) {
      const lo = Math.max(a, origin + k * bw), hi = Math.min(b, origin + (k + 1) * bw);
      arr[l * nb + k] += Math.max(hi - lo, 1e-3);
    }
  }
  function fromCalls(g, W, lo, hi, slo, shi) {
    const pxUs = (v1 - v0) / g.pw;
    for (let j = slo; j < shi; j++) {
      if (sE[j] < v0) continue;
      addSpan(P.held, W, sLane[j], sS[j], sE[j], v0, pxUs);
      if (!isNaN(sZ[j])) addSpan(P.zomb, W, sLane[j], sZ[j], sE[j], v0, pxUs);
    }
    for (let i = lo; i < hi; i++) {
      const e = isNaN(t1[i]) ? t0[i] : t1[i];
      if (e < v0 || e > v1) continue;
      const k = Math.min(W - 1, Math.floor((e - v0) / pxUs));
      addCall(P, k, lane[i] * W + k, i);
    }
  }
  const NB0 = (() => { let nb = 1024; while (nb < 65536 && nb * 8 < N && nb * 2 * nLanes <= (1 << 22)) nb *= 2; return nb; })();
  const BW0 = END / NB0;
  let levels = null;
  function level(nb) {
    const L = { nb };
    for (const k of LANE_KEYS) L[k] = new Float32Array(nLanes * nb);
    for (const k of KEYS) L[k] = new Float64Array(nb);
    return L;
  }
  function buildPyramid() {
    const L0 = level(NB0);
    for (let j = 0; j < M; j++) {
      addSpan(L0.held, NB0, sLane[j], sS[j], sE[j], 0, BW0);
      if (!isNaN(sZ[j])) addSpan(L0.zomb, NB0, sLane[j], sZ[j], sE[j], 0, BW0);
    }
    for (let i = 0; i < N; i++) {
      const e = isNaN(t1[i]) ? t0[i] : t1[i], k = Math.min(NB0 - 1, Math.floor(e / BW0));
      addCall(L0, k, lane[i] * NB0 + k, i);
    }
    levels = [L0];
    for (let prev = L0; prev.nb > 1;) {
      const nb = prev.nb >> 1, L = level(nb);
      for (let k = 0; k < nb; k++) {
        for (let l = 0; l < nLanes; l++) for (const key of LANE_KEYS) L[key][l * nb + k] = prev[key][l * prev.nb + 2 * k] + prev[key][l * prev.nb + 2 * k + 1];
        for (const key of KEYS) L[key][k] = key.endsWith("Max") ? Math.max(prev[key][2 * k], prev[key][2 * k + 1]) : prev[key][2 * k] + prev[key][2 * k + 1];
      }
      levels.push(L);
      prev = L;
    }
  }
  function fromPyramid(g, W) {
    if (!levels) { const t = performance.now(); buildPyramid(); document.body.dataset.pyramidMs = (performance.now() - t).toFixed(0); }
    const pxUs = (v1 - v0) / g.pw;
    const li = Math.max(0, Math.min(levels.length - 1, Math.floor(Math.log2(pxUs / BW0)))), L = levels[li], nb = L.nb, bw = BW0 * Math.pow(2, li);
    for (let p = 0; p < W; p++) {
      const ta = v0 + p * pxUs, ka = Math.max(0, Math.floor(ta / bw)), kb = Math.min(nb - 1, Math.floor((ta + pxUs) / bw - 1e-9));
      for (let k = ka; k <= kb; k++) {
        for (let l = 0; l < nLanes; l++) for (const key of LANE_KEYS) P[key][l * W + p] += L[key][l * nb + k];
        for (const key of KEYS) P[key][p] = key.endsWith("Max") ? Math.max(P[key][p], L[key][k]) : P[key][p] + L[key][k];
      }
    }
  }
  function accumulate(g, lo, hi, slo, shi) {
    const W = Math.ceil(g.pw);
    pixelArrays(W);
    const pyramid = hi - lo > DETAIL_LIMIT && BW0 <= (v1 - v0) / g.pw;
    if (pyramid) fromPyramid(g, W); else fromCalls(g, W, lo, hi, slo, shi);
    document.body.dataset.source = pyramid ? "pyramid" : "calls";
  }

  function drawHighlights(g) {
    const { ctx } = g;
    ctx.strokeStyle = "#eab308"; ctx.lineWidth = 3;
    for (const i of highlight) {
      const y = laneY(lane[i]), e = isNaN(t1[i]) ? END : t1[i];
      const a = X(t0[i], g) - 4, b = X(e, g) + 4;
      ctx.strokeRect(a, y + 0.5, Math.max(8, b - a), laneH - 1);
    }
    ctx.lineWidth = 1;
  }

  // Latency of acquire and write oks, per 2-pixel bin: mean as a line, up to the max shaded.
  function drawLatency(detailed) {
    const g = setup(cvL, 170), { ctx } = g, top = 6, bottom = g.h - AXIS;
    drawBands(g, top, bottom, false);
    const BIN = 2, nb = Math.ceil(P.W / BIN);
    const series = [["a", "#2563eb"], ["w", "#15803d"]].map(([k, color]) => {
      const s = { color, max: new Float64Array(nb), sum: new Float64Array(nb), n: new Float64Array(nb) };
      for (let p = 0; p < P.W; p++) {
        const b = (p / BIN) | 0;
        s.max[b] = Math.max(s.max[b], P[k + "Max"][p]); s.sum[b] += P[k + "Sum"][p]; s.n[b] += P[k + "N"][p];
      }
      return s;
    });
    let yMax = 1, yMin = Infinity;
    for (const s of series) for (let b = 0; b < nb; b++) if (s.n[b]) { yMax = Math.max(yMax, s.max[b]); yMin = Math.min(yMin, s.sum[b] / s.n[b]); }
    if (!isFinite(yMin)) yMin = 1;
    const l0 = Math.log10(Math.max(1, yMin * 0.8)), l1 = Math.log10(yMax * 1.2) + 1e-9;
    const Y = (d) => bottom - (Math.log10(Math.max(d, 1)) - l0) / (l1 - l0) * (bottom - top);
    ctx.strokeStyle = "#e5e7eb"; ctx.fillStyle = "#6b7280"; ctx.font = "11px system-ui, sans-serif";
    for (let e = Math.ceil(l0); e <= l1; e++) { const y = Y(Math.pow(10, e)); ctx.beginPath(); ctx.moveTo(GUTTER, y); ctx.lineTo(GUTTER + g.pw, y); ctx.stroke(); ctx.fillText(fmtDur(Math.pow(10, e)), 4, y + 4); }
    for (const s of series) {
      ctx.fillStyle = s.color; ctx.globalAlpha = 0.35;
      for (let b = 0; b < nb; b++) if (s.n[b]) { const ym = Y(s.max[b]), ya = Y(s.sum[b] / s.n[b]); ctx.fillRect(GUTTER + b * BIN, ym, BIN, Math.max(1, ya - ym)); }
      ctx.globalAlpha = 1; ctx.strokeStyle = s.color; ctx.lineWidth = 1.5; ctx.beginPath();
      let pen = false, last = -1;
      for (let b = 0; b < nb; b++) {
        if (!s.n[b]) continue;
        const x = GUTTER + b * BIN + BIN / 2, y = Y(s.sum[b] / s.n[b]);
        if (pen && b - last <= 8) ctx.lineTo(x, y); else { ctx.moveTo(x, y); pen = true; }
        last = b;
        if (detailed) ctx.fillRect(x - 1.5, y - 1.5, 3, 3);
      }
      ctx.stroke(); ctx.lineWidth = 1;
    }
    axis(g, bottom);
  }

  // Throughput: completed ok ops per second, per 6-pixel bin; rejected writes in red.
  function drawThroughput() {
    const g = setup(cvQ, 110), { ctx } = g, top = 6, bottom = g.h - AXIS;
    drawBands(g, top, bottom, false);
    const BIN = 6, nb = Math.ceil(P.W / BIN), ok = new Float64Array(nb), bad = new Float64Array(nb);
    for (let p = 0; p < P.W; p++) { ok[(p / BIN) | 0] += P.ok[p]; bad[(p / BIN) | 0] += P.st[p]; }
    const binSecs = (v1 - v0) / g.pw * BIN / 1e6;
    let m = 1;
    for (let b = 0; b < nb; b++) m = Math.max(m, ok[b] + bad[b]);
    const H = bottom - top;
    ctx.fillStyle = "#64748b"; ctx.beginPath();
    for (let b = 0; b < nb; b++) if (ok[b]) ctx.rect(GUTTER + b * BIN, bottom - ok[b] / m * H, BIN - 1, ok[b] / m * H);
    ctx.fill();
    ctx.fillStyle = "#dc2626"; ctx.beginPath();
    for (let b = 0; b < nb; b++) if (bad[b]) { const h1 = ok[b] / m * H, h2 = Math.max(2, bad[b] / m * H); ctx.rect(GUTTER + b * BIN, bottom - h1 - h2, BIN - 1, h2); }
    ctx.fill();
    ctx.fillStyle = "#6b7280"; ctx.font = "11px system-ui, sans-serif";
    ctx.fillText(Math.round(m / binSecs) + "/s", 4, top + 10);
    ctx.fillText("0", 4, bottom);
    axis(g, bottom);
  }

  let pending = false;
  function draw() {
    const t = performance.now();
    drawTimeline(); drawLatency(mode === "detail"); drawThroughput();
    document.getElementById("lc-view").textContent = fmtT(v0) + " – " + fmtT(v1) + " · " + mode + (mode === "aggregate" ? " (zoom in for every op)" : "");
    document.body.dataset.drawMs = (performance.now() - t).toFixed(0);
  }
  function redraw() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } }
  function setView(a, b) {
    const span = Math.min(Math.max(b - a, 5), END * 1.1);
    const mid = (a + b) / 2;
    v0 = Math.max(-END * 0.05, mid - span / 2); v1 = v0 + span;
    redraw();
  }

  // Zoom with the wheel around the pointer; pan by dragging; double-click fits.
  for (const cv of [cvT, cvL, cvQ]) {
    cv.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const g = { pw: cv.clientWidth - GUTTER - RIGHT };
      const at = T(ev.offsetX, g), k = Math.exp(ev.deltaY * 0.0015);
      setView(at - (at - v0) * k, at + (v1 - at) * k);
    }, { passive: false });
    let drag = null;
    cv.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, a: v0, b: v1 }; cv.classList.add("dragging"); });
    window.addEventListener("mouseup", () => { drag = null; cv.classList.remove("dragging"); });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const dt = (ev.clientX - drag.x) / (cv.clientWidth - GUTTER - RIGHT) * (drag.b - drag.a);
      v0 = drag.a - dt; v1 = drag.b - dt; redraw();
    });
    cv.addEventListener("dblclick", () => setView(0, END));
  }
  document.getElementById("lc-fit").onclick = () => setView(0, END);
  document.getElementById("lc-in").onclick = () => { const m = (v0 + v1) / 2, s = (v1 - v0) / 4; setView(m - s, m + s); };
  document.getElementById("lc-out").onclick = () => { const m = (v0 + v1) / 2, s = v1 - v0; setView(m - s, m + s); };
  window.addEventListener("resize", redraw);

  // Hover: in detail mode, the call or critical section under the pointer.
  const F_NAMES = ["acquire", "renew", "release", "write", "read", "op"], O_NAMES = ["ok", "fail", "rejected (stale token)", "info (unknown)"];
  cvT.addEventListener("mousemove", (ev) => {
    const l = Math.floor((ev.offsetY - TOP) / laneH);
    if (mode !== "detail" || l < 0 || l >= nLanes) { tip.style.display = "none"; return; }
    const g = { pw: cvT.clientWidth - GUTTER - RIGHT }, [lo, hi] = visibleCalls();
    let best = -1, bd = 6;
    for (let i = lo; i < hi; i++) {
      if (lane[i] !== l) continue;
      const e = isNaN(t1[i]) ? END : t1[i], a = X(t0[i], g), b = X(e, g);
      const d = ev.offsetX < a ? a - ev.offsetX : ev.offsetX > b ? ev.offsetX - b : 0;
      if (fk[i] !== F_WRITE && d === 0 && bd <= 0) continue;
      if (d < bd || (d === 0 && fk[i] === F_WRITE)) { bd = d; best = i; }
    }
    let text = null;
    if (best >= 0) {
      const i = best;
      text = "p" + processAt(lane[i], t0[i]) + " " + F_NAMES[fk[i]] + " " + O_NAMES[oc[i]] +
        (isNaN(tok[i]) ? "" : "\ntoken " + tok[i]) + (isNaN(seq[i]) ? "" : "  seq " + seq[i]) +
        "\ninvoke " + fmtT(t0[i]) + (isNaN(t1[i]) ? "  (never completed)" : "  took " + fmtDur(t1[i] - t0[i])) +
        "\nop #" + ix[i] + (C.cx[i] >= 0 ? " / #" + (ix[i] + C.cx[i]) : "");
    } else {
      const t = T(ev.offsetX, g), [slo, shi] = visibleSections();
      for (let j = slo; j < shi; j++) {
        if (sLane[j] !== l || t < sS[j] || t > sE[j]) continue;
        const a = S.c[j];
        text = "critical section of p" + processAt(l, sS[j]) + (isNaN(tok[a]) ? "" : ", token " + tok[a]) +
          "\n" + fmtT(sS[j]) + " → " + fmtT(sE[j]) + (isNaN(sLe[j]) ? "" : "\nlease until " + fmtT(sLe[j])) +
          (isNaN(sZ[j]) ? "" : "\ndeposed at " + fmtT(sZ[j]) + ": went on for " + fmtDur(sE[j] - sZ[j]));
      }
    }
    if (!text) { tip.style.display = "none"; return; }
    tip.textContent = text; tip.style.display = "block";
    tip.style.left = (ev.clientX + 12) + "px"; tip.style.top = (ev.clientY + 12) + "px";
  });
  cvT.addEventListener("mouseleave", () => { tip.style.display = "none"; });

  // Anomaly cards, zombie rows and fault rows name history indexes (data-ix): find
  // their calls (by invoke or completion index) and fault bands, zoom there, highlight.
  let byCompletion = null;
  function rowOf(x) {
    const r = lowerBound(ix, x, 0, N);
    if (r < N && ix[r] === x) return r;
    if (!byCompletion) { byCompletion = new Map(); for (let i = 0; i < N; i++) if (C.cx[i] >= 0) byCompletion.set(ix[i] + C.cx[i], i); }
    return byCompletion.has(x) ? byCompletion.get(x) : -1;
  }
  // Focus a list of history indexes: highlight their calls and fault bands, zoom there.
  function focus(xs, el) {
    highlight = new Set(); hiFaults = new Set();
    let a = Infinity, b = -Infinity;
    for (const x of xs) {
      const r = rowOf(x);
      if (r >= 0) { highlight.add(r); a = Math.min(a, t0[r]); b = Math.max(b, isNaN(t1[r]) ? t0[r] : t1[r]); }
      D.faults.forEach((f, k) => { if (f.ix.includes(x)) { hiFaults.add(k); a = Math.min(a, f.s); b = Math.max(b, f.e); } });
    }
    document.querySelectorAll(".active").forEach((c) => c.classList.remove("active"));
    if (el) el.classList.add("active");
    document.body.dataset.highlighted = String(highlight.size + hiFaults.size);
    if (a <= b) { const pad = Math.max((b - a) * 0.3, 500); setView(a - pad, b + pad); } else redraw();
  }
  const parseIx = (s) => (s || "").split(",").filter((x) => x !== "").map(Number);
  document.querySelectorAll("[data-ix]").forEach((el) => el.addEventListener("click", () => {
    focus(parseIx(el.dataset.ix), el);
    history.replaceState(null, "", "#ix=" + el.dataset.ix);
    document.getElementById("lc-timeline-section").scrollIntoView({ behavior: "smooth", block: "start" });
  }));

  // A link to report.html#ix=85,108 opens with those ops focused.
  const m = /^#ix=([0-9,]+)$/.exec(location.hash);
  if (m) {
    const card = Array.from(document.querySelectorAll(".card[data-ix]")).find((c) => c.dataset.ix === m[1]);
    focus(parseIx(m[1]), card);
  }
  draw();
  document.body.dataset.loadMs = (performance.now() - started).toFixed(0);
  // report.html#bench: redraw at several zoom levels and record the mean time, so the
  // report bench can show that panning and zooming stay interactive; then zoom and pan
  // with real input events and record the effect (the browser test reads it).
  if (location.hash === "#bench") {
    const t = performance.now(), views = [[0, END], [END * 0.25, END * 0.75], [END * 0.4, END * 0.6], [END * 0.45, END * 0.55], [END * 0.1, END * 0.9]];
    for (const [a, b] of views) { v0 = a; v1 = b; draw(); }
    document.body.dataset.redrawMs = ((performance.now() - t) / views.length).toFixed(0);
    // Then the way a person zooms and pans: a wheel turn and a drag on the timeline.
    v0 = 0; v1 = END;
    const r = cvT.getBoundingClientRect(), at = { clientX: r.left + GUTTER + (r.width - GUTTER) / 2, clientY: r.top + TOP + 2, bubbles: true, cancelable: true };
    cvT.dispatchEvent(new WheelEvent("wheel", Object.assign({ deltaY: -400 }, at)));
    document.body.dataset.wheelSpan = ((v1 - v0) / END).toFixed(3);
    const before = v0;
    cvT.dispatchEvent(new MouseEvent("mousedown", at));
    window.dispatchEvent(new MouseEvent("mousemove", Object.assign({}, at, { clientX: at.clientX + 100 })));
    window.dispatchEvent(new MouseEvent("mouseup", at));
    document.body.dataset.panned = v0 < before ? "left" : v0 > before ? "right" : "no";
    draw();
  }
})();
