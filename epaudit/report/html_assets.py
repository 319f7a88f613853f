"""The HTML report's inline stylesheet and script (``epaudit/report/html.py`` embeds both).

Kept apart from the formatter so the Python stays readable. The script builds the heat
map from the JSON data block of the page; it sets text with ``textContent`` only (never
``innerHTML``), so nothing from a result (an ORT message, a feature id) is ever read as
markup, and it takes links only when they are ``http(s)``. No network at view time: no
font, no CDN, no fetch.

URL fragment (``report.html#outcome=MISMATCH&ep=CUDA&op=Attention&kind=silent&q=gqa&expand=1&cell=FID|EP``)
sets the filters and opens one cell's evidence, so a link (or a headless browser) can
show a filtered view.
"""

CSS = r"""
:root{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f23;background:#fff}
body{margin:0 1.2em 2em}
h1{font-size:1.4em;margin:.6em 0 .2em}h2{font-size:1.15em;margin:1.2em 0 .4em}
.verdict{padding:.6em .9em;border-radius:6px;font-weight:600;margin:.4em 0}
.v0{background:#e6f4ea;border:1px solid #2e7d32}.v1{background:#fdecea;border:1px solid #c62828}
.v3{background:#fff4e5;border:1px solid #ef6c00}.vnone{background:#eef2f7;border:1px solid #90a4ae}
.meta{color:#57606a;font-size:.92em}
.filters{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:center;margin:.6em 0;padding:.5em .7em;
 background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;position:sticky;top:0;z-index:3}
.filters label{white-space:nowrap}
.legend span{display:inline-block;margin:0 .5em .2em 0}
.sw{display:inline-block;width:1.1em;height:1.1em;vertical-align:middle;border-radius:3px;margin-right:.25em}
table.heat{border-collapse:collapse;font-size:12.5px}
table.heat th,table.heat td{border:1px solid #fff;padding:2px 5px;white-space:nowrap}
table.heat thead th{position:sticky;top:3.1em;background:#fff;z-index:2;border-bottom:1px solid #d0d7de}
table.heat th.rowh{text-align:left;font-weight:normal;max-width:38em;overflow:hidden;text-overflow:ellipsis}
tr.op th.rowh{font-weight:600;cursor:pointer}
tr.op th.rowh::before{content:"\25B8  ";color:#57606a}
tr.op.open th.rowh::before{content:"\25BE  "}
tr.feat th.rowh{padding-left:1.8em;font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
td.c{text-align:center;cursor:pointer;min-width:4.6em;color:#fff;font-weight:600}
td.c.failing{outline:3px solid #1b1f23;outline-offset:-3px}
td.c.gap{background-image:repeating-linear-gradient(45deg,transparent 0 4px,rgba(255,255,255,.35) 4px 8px)}
td.c.sel{outline:3px solid #0969da;outline-offset:-3px}
.o-PASS{background:#2e7d32}.o-REJECTED{background:#b08900}.o-FALLBACK{background:#e65100}
.o-DECOMPOSED{background:#8d6e63}.o-IGNORED{background:#c62828}.o-UNWRITTEN{background:#ad1457}
.o-NAN{background:#d50000}.o-MISMATCH{background:#b71c1c}.o-CRASH{background:#6a1b9a}
.o-TIMEOUT{background:#4527a0}.o-ERROR{background:#263238}
.o-UNAVAILABLE{background:#b0bec5;color:#263238!important}.o-SKIPPED{background:#dfe3e8;color:#57606a!important}
.o-NONE{background:#f6f8fa;color:#8c959f!important}
[hidden]{display:none!important}
#detail{position:fixed;right:0;top:0;bottom:0;width:min(46em,48vw);overflow:auto;background:#fff;
 border-left:2px solid #d0d7de;padding:.8em 1em;box-shadow:-4px 0 12px rgba(0,0,0,.08);z-index:5}
#detail h3{margin:.2em 0 .5em;font-size:1.05em;word-break:break-all}
#detail dl{display:grid;grid-template-columns:max-content 1fr;gap:.25em .8em;margin:0}
#detail dt{color:#57606a}#detail dd{margin:0;word-break:break-word}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.5em;border-radius:4px;font-size:12px}
.finding-fail{color:#c62828;font-weight:600}.finding-warn{color:#9a6700}
table.kv{border-collapse:collapse;margin:.2em 0 .6em}table.kv td,table.kv th{border:1px solid #d0d7de;
 padding:2px 6px;vertical-align:top;text-align:left}
button{font:inherit;padding:.15em .6em}
"""

JS = r"""
(function(){
"use strict";
var T0 = performance.now();
var D = JSON.parse(document.getElementById("epaudit-data").textContent);
var O = D.outcomes, K = D.kinds, V = D.verdicts, EPS = D.eps;
var table = document.getElementById("heat"), tbody = table.tBodies[0];
var detail = document.getElementById("detail");
var ABBR = {PASS:"PASS",REJECTED:"REJ",FALLBACK:"FALLB",DECOMPOSED:"DECOMP",IGNORED:"IGNORED",
  UNWRITTEN:"UNWRIT",NAN:"NAN",MISMATCH:"MISM",CRASH:"CRASH",TIMEOUT:"T/O",ERROR:"ERROR",
  UNAVAILABLE:"n/a",SKIPPED:"skip",NONE:"\u00b7"};
function el(tag, cls, text){var e=document.createElement(tag); if(cls) e.className=cls;
  if(text!==undefined&&text!==null) e.textContent=String(text); return e;}
function outc(c){return c ? O[c[0]] : "NONE";}
function safeUrl(u){return /^https?:\/\/[^\s"'<>]+$/.test(u) ? u : null;}
/* ---- the table ---- */
var head = table.tHead.rows[0];
EPS.forEach(function(ep, j){var th=el("th","col",ep.alias); th.dataset.ep=j;
  th.title=ep.name+(ep.live?" (live)":" (not live: "+ep.reason+")")+(ep.dist?"\n"+ep.dist:""); head.appendChild(th);});
var opRows = [], featRows = [];
function cellTd(c, fi, j){
  var o = outc(c), td = el("td", "c o-"+o, ABBR[o]||o);
  td.dataset.f = fi; td.dataset.e = j;
  if(c){ if(V[c[1]]==="failed"){td.classList.add("failing"); td.textContent += "!";}
         if(V[c[1]]==="declared_gap") td.classList.add("gap"); }
  return td;
}
var frag = document.createDocumentFragment();
D.ops.forEach(function(op, oi){
  var tr = el("tr","op"); tr.dataset.op = oi;
  tr.appendChild(el("th","rowh",op[0]+"  ("+op[1].length+")"));
  var tds = EPS.map(function(_, j){var td=el("td","c o-NONE"); td.dataset.e=j; tr.appendChild(td); return td;});
  frag.appendChild(tr); opRows.push({tr:tr, tds:tds, feats:[]});
  op[1].forEach(function(fi){
    var fr = el("tr","feat"); fr.dataset.feature = D.features[fi]; fr.dataset.op = oi; fr.hidden = true;
    var th = el("th","rowh",D.features[fi]); th.title = D.features[fi]; fr.appendChild(th);
    D.cells[fi].forEach(function(c, j){fr.appendChild(cellTd(c, fi, j));});
    frag.appendChild(fr); featRows[fi] = fr; opRows[oi].feats.push(fi);
  });
});
tbody.appendChild(frag);
var open = {};
tbody.addEventListener("click", function(ev){
  var t = ev.target; if(t.nodeType!==1) return;
  if(t.classList.contains("rowh") && t.parentNode.classList.contains("op")){
    var oi=+t.parentNode.dataset.op; open[oi]=!open[oi]; apply(false); return;}
  if(t.classList.contains("c") && t.dataset.f!==undefined) show(+t.dataset.f, +t.dataset.e, t);
});
/* ---- filters ---- */
var fEp=document.getElementById("f-ep"), fOut=document.getElementById("f-outcome"),
    fOp=document.getElementById("f-op"), fKind=document.getElementById("f-kind"), fQ=document.getElementById("f-q");
function opt(sel, v, label){var o=el("option",null,label||v); o.value=v; sel.appendChild(o);}
EPS.forEach(function(ep, j){opt(fEp, String(j), ep.alias);});
O.forEach(function(o){opt(fOut, o);}); opt(fOut, "NOTPASS", "anything but PASS");
D.ops.forEach(function(op, oi){opt(fOp, String(oi), op[0]);});
K.forEach(function(k, i){opt(fKind, String(i), k);}); opt(fKind, "ANYFAIL", "any failing finding");
function cellMatches(c, out, kind){
  if(out!==""){var o=outc(c); if(out==="NOTPASS"? o==="PASS" : o!==out) return false;}
  if(kind!==""){ if(!c) return false;
    if(kind==="ANYFAIL"){ if(!c[4].some(function(f){return f[1];})) return false; }
    else if(!c[4].some(function(f){return f[0]===+kind;})) return false; }
  return true;
}
var RANK={PASS:0,SKIPPED:-1,UNAVAILABLE:-1,NONE:-2,REJECTED:1,FALLBACK:1,DECOMPOSED:1,CRASH:2,TIMEOUT:2,ERROR:2,
  IGNORED:3,UNWRITTEN:3,NAN:3,MISMATCH:3};
function apply(fromUser){
  var ep=fEp.value, out=fOut.value, op=fOp.value, kind=fKind.value, q=fQ.value.trim().toLowerCase();
  var filtering = out!=="" || kind!=="" || q!=="";
  EPS.forEach(function(_, j){var hide = ep!=="" && +ep!==j;
    table.querySelectorAll('[data-e="'+j+'"]').forEach(function(n){n.hidden=hide;});
    head.cells[j+1].hidden = hide;});
  var cols = ep==="" ? EPS.map(function(_, j){return j;}) : [+ep];
  var shown = 0;
  opRows.forEach(function(r, oi){
    var any = 0, worst = [], fails = [], n = [];
    cols.forEach(function(j){worst[j]="NONE"; fails[j]=0; n[j]=[0,0];});
    r.feats.forEach(function(fi){
      var fr = featRows[fi]; var row = D.cells[fi];
      var ok = (op==="" || +op===oi) && (q==="" || D.features[fi].toLowerCase().indexOf(q)>=0)
        && cols.some(function(j){return cellMatches(row[j], out, kind);});
      fr.hidden = !ok || !(open[oi] || filtering && D.expandOnFilter);
      if(ok){ any++; cols.forEach(function(j){var o=outc(row[j]);
        if(RANK[o]>RANK[worst[j]]) worst[j]=o; if(o==="PASS") n[j][0]++; if(row[j]) n[j][1]++;
        if(row[j] && V[row[j][1]]==="failed") fails[j]++;});}
    });
    r.tr.hidden = any===0; r.tr.classList.toggle("open", !!open[oi] || filtering && D.expandOnFilter);
    if(any) shown += any;
    cols.forEach(function(j){var td=r.tds[j]; td.className="c o-"+worst[j]+(fails[j]?" failing":"");
      td.textContent = n[j][0]+"/"+n[j][1]+(fails[j]?" \u2716"+fails[j]:"");
      td.title = n[j][0]+" of "+n[j][1]+" probed feature(s) passed; "+fails[j]+" with a failing finding; worst: "+worst[j];});
  });
  document.getElementById("shown").textContent = shown+" of "+D.features.length+" feature(s) shown";
  if(fromUser){ var h=[]; if(ep!=="") h.push("ep="+encodeURIComponent(EPS[+ep].alias));
    if(out!=="") h.push("outcome="+out); if(op!=="") h.push("op="+encodeURIComponent(D.ops[+op][0]));
    if(kind!=="") h.push("kind="+(kind==="ANYFAIL"?"failing":K[+kind])); if(q) h.push("q="+encodeURIComponent(q));
    history.replaceState(null, "", h.length ? "#"+h.join("&") : location.pathname); }
}
[fEp,fOut,fOp,fKind].forEach(function(s){s.addEventListener("change", function(){apply(true);});});
fQ.addEventListener("input", function(){apply(true);});
document.getElementById("expand").addEventListener("click", function(){
  var all = opRows.every(function(_, oi){return open[oi];});
  opRows.forEach(function(_, oi){open[oi]=!all;}); apply(false);});
/* ---- evidence ---- */
function kv(dl, k, v){ if(v===undefined||v===null||v==="") return; dl.appendChild(el("dt",null,k));
  var dd=el("dd"); if(v.nodeType) dd.appendChild(v); else dd.textContent=String(v); dl.appendChild(dd);}
function declNode(d){var span=el("span"); var m=/(https?:\/\/\S+)/.exec(d);
  if(!m || !safeUrl(m[1])){span.textContent=d; return span;}
  span.appendChild(document.createTextNode(d.slice(0, m.index)));
  var a=el("a",null,m[1]); a.href=m[1]; a.rel="noreferrer noopener"; a.target="_blank"; span.appendChild(a);
  span.appendChild(document.createTextNode(d.slice(m.index+m[1].length))); return span;}
var selected=null;
function show(fi, j, td){
  var c = D.cells[fi][j], ep = EPS[j];
  if(selected) selected.classList.remove("sel"); selected = td || null; if(td) td.classList.add("sel");
  detail.hidden = false; detail.textContent = "";
  var close = el("button", null, "close \u2715"); close.style.float="right";
  close.addEventListener("click", function(){detail.hidden=true; if(selected) selected.classList.remove("sel");});
  detail.appendChild(close);
  detail.appendChild(el("h3", null, D.features[fi]+" on "+ep.alias));
  var dl = el("dl"); detail.appendChild(dl);
  kv(dl, "outcome", c ? O[c[0]] : "not probed");
  kv(dl, "reads as", c ? V[c[1]].replace("_"," ") : "");
  kv(dl, "summary", c && c[2]);
  kv(dl, "declared", declNode(c ? D.decl[c[3]] : (D.cellDecl[fi+","+j] || "undeclared")));
  var ev = c && c[5] || {};
  if(ev.error) kv(dl, "ORT says", ev.error);
  if(ev.placement) kv(dl, "placement", ev.placement);
  if(ev.worst) kv(dl, "worst error", ev.worst);
  kv(dl, "EP", ep.name+(ep.dist?" \u2014 "+ep.dist:"")+(ep.machine?" on "+ep.machine:"")+(ep.live?"":" (not live: "+ep.reason+")"));
  if(c && c[4].length){ detail.appendChild(el("h3", null, "Findings"));
    c[4].forEach(function(f){var p=el("p", f[1]?"finding-fail":"finding-warn", (f[1]?"FAIL ":"warn ")+K[f[0]]+": ");
      p.appendChild(el("span", null, f[2])); p.lastChild.style.fontWeight="normal"; detail.appendChild(p);});}
  if(ev.raw){ detail.appendChild(el("h3", null, "Evidence")); detail.appendChild(el("pre", null, ev.raw)); }
}
/* ---- state from the URL fragment ---- */
function fromHash(){
  var h = {}; location.hash.replace(/^#/, "").split("&").forEach(function(p){
    var i=p.indexOf("="); if(i>0) h[p.slice(0,i)] = decodeURIComponent(p.slice(i+1));});
  function pick(sel, pred){for(var i=0;i<sel.options.length;i++) if(pred(sel.options[i])){sel.selectedIndex=i; return;}}
  if(h.ep) pick(fEp, function(o){return o.textContent===h.ep;});
  if(h.outcome) pick(fOut, function(o){return o.value===h.outcome.toUpperCase();});
  if(h.op) pick(fOp, function(o){return o.textContent===h.op;});
  if(h.kind) pick(fKind, function(o){return h.kind==="failing" ? o.value==="ANYFAIL" : o.textContent===h.kind;});
  if(h.q) fQ.value = h.q;
  if(h.expand==="1") opRows.forEach(function(_, oi){open[oi]=true;});
  apply(false);
  if(h.cell){ var k=h.cell.lastIndexOf("|"), fi=D.features.indexOf(h.cell.slice(0,k));
    var j=EPS.findIndex(function(e){return e.alias===h.cell.slice(k+1);});
    if(fi>=0 && j>=0){ var oi=D.featOp[fi]; open[oi]=true; apply(false);
      show(fi, j, table.querySelector('td[data-f="'+fi+'"][data-e="'+j+'"]')); } }
}
window.addEventListener("hashchange", fromHash);
fromHash();
/* how long the page took: read by benchmarks/html_report.py, shown to nobody */
document.body.dataset.renderMs = (performance.now() - T0).toFixed(1);
document.body.dataset.readyMs = performance.now().toFixed(1);
document.body.dataset.ready = "1";
})();
"""
