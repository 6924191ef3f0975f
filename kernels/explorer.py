"""A recorded explorer: measurements shown as a self-contained HTML + JavaScript figure.

The website has no kernel, so a live widget cannot re-measure there. What it can do is replay what
was measured when the notebook ran on a GPU: the records are embedded in the page and a few lines of
plain JavaScript let the reader move the same sliders over them. No library, no CDN, no network.
"""
from __future__ import annotations

import html

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Explorer", "HtmlFragment", "encode_columns", "decode_columns"]


class HtmlFragment(str):
    """A string of HTML that notebooks render as HTML (and tests can treat as a plain string)."""

    def _repr_html_(self) -> str:
        return str(self)


def _clean(value: Any) -> Any:
    """Make a value JSON-safe: NaN/inf become null, NumPy scalars become Python numbers."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        value = value.item()  # NumPy scalar
        if not isinstance(value, float):
            return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 2**53 else float(f"{value:.6g}")
    return str(value)


def _delta_runs(codes: Sequence[int]) -> list[int]:
    """Run-length encoded differences: a grid column such as 32, 64, ..., 1024 repeated collapses to
    a handful of numbers. Flat list of (delta, count) pairs."""
    runs: list[int] = []
    previous = 0
    for code in codes:
        delta = code - previous
        previous = code
        if runs and runs[-2] == delta:
            runs[-1] += 1
        else:
            runs += [delta, 1]
    return runs


def encode_columns(records: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> dict[str, Any]:
    """Column-oriented JSON data, compressed because a sweep repeats few distinct values many times.

    Each column is the shortest of: a plain list; ``{"d": distinct, "i": indices}``; or
    ``{"d": distinct, "r": delta_runs_of_indices}``. A 14 000-point occupancy grid stays well under
    300 KB this way, and the page needs no decompression library.
    """
    columns: dict[str, Any] = {}
    for field in fields:
        values = [_clean(r.get(field)) for r in records]
        distinct: list[Any] = []
        index: dict[str, int] = {}
        codes: list[int] = []
        for v in values:
            key = json.dumps(v)
            if key not in index:
                index[key] = len(distinct)
                distinct.append(v)
            codes.append(index[key])
        candidates = [values, {"d": distinct, "i": codes}, {"d": distinct, "r": _delta_runs(codes)}]
        columns[field] = min(candidates, key=lambda c: len(json.dumps(c, separators=(",", ":"))))
    return {"n": len(records), "cols": columns}


def decode_columns(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Inverse of :func:`encode_columns` (missing values come back as None)."""
    cols: dict[str, list[Any]] = {}
    for field, col in data["cols"].items():
        if isinstance(col, dict) and "r" in col:
            codes, code, runs = [], 0, col["r"]
            for delta, count in zip(runs[::2], runs[1::2]):
                for _ in range(count):
                    code += delta
                    codes.append(code)
            cols[field] = [col["d"][i] for i in codes]
        elif isinstance(col, dict):
            cols[field] = [col["d"][i] for i in col["i"]]
        else:
            cols[field] = list(col)
    return [{f: cols[f][k] for f in cols} for k in range(data["n"])]


def _distinct_sorted(values: Sequence[Any]) -> list[Any]:
    """Distinct values, numbers ascending, then anything else in first-seen order."""
    seen: list[Any] = []
    for v in values:
        if v is not None and v not in seen:
            seen.append(v)
    numbers = sorted(v for v in seen if isinstance(v, (int, float)) and not isinstance(v, bool))
    others = [v for v in seen if not (isinstance(v, (int, float)) and not isinstance(v, bool))]
    return numbers + others


class Explorer:
    """Recorded measurements as an interactive figure that needs no kernel: y against x, one slider
    per control field, one line per ``series`` value, reference lines and a readout."""

    def __init__(
        self,
        records: Sequence[Mapping[str, Any]],
        x: str,
        y: str,
        controls: Sequence[str] = (),
        series: str | None = None,
        title: str = "",
        xlabel: str | None = None,
        ylabel: str | None = None,
        log_x: bool = False,
        log_y: bool = False,
        hlines: Mapping[str, float] | None = None,
        readout: Sequence[str] = (),
        height: int = 320,
        initial: Mapping[str, Any] | None = None,
        caption: str = "Recorded measurements; run the notebook on a GPU to measure live.",
    ) -> None:
        self.records = [dict(r) for r in records]
        self.caption = caption
        self.x, self.y = x, y
        self.controls = [c for c in controls if c not in (x, series)]
        self.series = series
        self.title = title
        self.xlabel = xlabel if xlabel is not None else x
        self.ylabel = ylabel if ylabel is not None else y
        self.log_x, self.log_y = bool(log_x), bool(log_y)
        self.hlines = {str(k): float(v) for k, v in (hlines or {}).items()}
        self.readout = list(readout)
        self.height = int(height)
        self.initial = dict(initial or {})
        self.id = "course-explorer-" + uuid.uuid4().hex[:12]

    @property
    def fields(self) -> list[str]:
        """Every field the figure needs, in a stable order (``note`` explains a missing y)."""
        wanted = [self.x, self.y, *self.controls, *([self.series] if self.series else []), *self.readout]
        if any("note" in r for r in self.records):
            wanted.append("note")
        return list(dict.fromkeys(wanted))

    def values(self, field: str) -> list[Any]:
        """Distinct sorted values of one field: what its slider steps over."""
        return _distinct_sorted([_clean(r.get(field)) for r in self.records])

    def _start_index(self, field: str) -> int:
        values = self.values(field)
        if field in self.initial:
            want = _clean(self.initial[field])
            if want in values:
                return values.index(want)
            numeric = [v for v in values if isinstance(v, (int, float))]
            if numeric and isinstance(want, (int, float)):
                return values.index(min(numeric, key=lambda v: abs(v - want)))
        return 0

    def payload(self) -> dict[str, Any]:
        """Config and data exactly as embedded in the page."""
        config = {
            "x": self.x, "y": self.y, "controls": self.controls, "series": self.series,
            "title": self.title, "xlabel": self.xlabel, "ylabel": self.ylabel,
            "logX": self.log_x, "logY": self.log_y, "readout": self.readout,
            "hlines": [[k, v] for k, v in self.hlines.items()], "height": self.height,
            "start": {f: self._start_index(f) for f in [*self.controls, self.x]},
        }
        return {"config": config, "data": encode_columns(self.records, self.fields)}

    def html(self) -> HtmlFragment:
        """The self-contained fragment: markup, embedded JSON and the script that draws it."""
        self.id = "course-explorer-" + uuid.uuid4().hex[:12]  # fresh per call: the same figure may be shown twice
        data = json.dumps(self.payload(), separators=(",", ":"), allow_nan=False)
        data = data.replace("</", "<\\/").replace("<!--", "<\\!--")
        sliders = []
        for field in self.controls:
            n = len(self.values(field))
            sliders.append(
                f'<label class="course-explorer-control">{_esc(field)} '
                f'<input type="range" min="0" max="{max(n - 1, 0)}" step="1" '
                f'value="{self._start_index(field)}" data-control="{_esc(field)}"> '
                f'<output class="course-explorer-value" data-for="{_esc(field)}"></output></label>'
            )
        nx = len(self.values(self.x))
        sliders.append(
            f'<label class="course-explorer-control course-explorer-point">{_esc(self.xlabel)} '
            f'<input type="range" min="0" max="{max(nx - 1, 0)}" step="1" '
            f'value="{self._start_index(self.x)}" data-point="{_esc(self.x)}"> '
            f'<output class="course-explorer-value" data-for="{_esc(self.x)}"></output></label>'
        )
        title = f'<div class="course-explorer-title">{_esc(self.title)}</div>' if self.title else ""
        return HtmlFragment(
            f'<div class="course-explorer" id="{self.id}" data-x="{_esc(self.x)}" data-y="{_esc(self.y)}" '
            f'style="font-family:sans-serif;font-size:13px;max-width:760px;border:1px solid #ddd;'
            f'border-radius:6px;padding:8px;margin:8px 0">'
            f"{title}"
            f'<svg class="course-explorer-plot" width="100%" height="{self.height}" '
            f'viewBox="0 0 720 {self.height}" preserveAspectRatio="xMidYMid meet" '
            f'xmlns="http://www.w3.org/2000/svg" role="img"></svg>'
            f'<div class="course-explorer-legend"></div>'
            f'<div class="course-explorer-controls" style="display:flex;flex-wrap:wrap;gap:4px 18px">'
            f'{"".join(sliders)}</div>'
            f'<div class="course-explorer-readout" style="margin-top:6px;font-family:monospace"></div>'
            f'<div class="course-explorer-caption" style="color:#777;font-size:11px">'
            f"{html.escape(self.caption)}</div>"
            f'<script type="application/json" class="course-explorer-data">{data}</script>'
            f"<script>{_JS.replace('__ID__', self.id)}</script>"
            f"</div>"
        )

    def _repr_html_(self) -> str:
        return str(self.html())


def _esc(text: Any) -> str:
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


# ES5 on purpose: it runs in whatever browser opens the website, with no build step.
_JS = r"""
(function(){
var root=document.getElementById("__ID__"); if(!root) return;
var P=JSON.parse(root.querySelector("script.course-explorer-data").textContent);
var C=P.config, D=P.data, NS="http://www.w3.org/2000/svg";
var COLORS=["#1f77b4","#d62728","#2ca02c","#ff7f0e","#9467bd","#8c564b","#e377c2","#17becf","#7f7f7f","#bcbd22"];
function col(f){var c=D.cols[f],o=[],j,k; if(!c){for(k=0;k<D.n;k++)o.push(null);return o;}
 if(c.r){var code=0;for(j=0;j<c.r.length;j+=2)for(k=0;k<c.r[j+1];k++){code+=c.r[j];o.push(c.d[code]);}return o;}
 if(c.d){for(j=0;j<c.i.length;j++)o.push(c.d[c.i[j]]);return o;} return c;}
var cols={}; for(var f in D.cols) cols[f]=col(f);
function distinct(f){var v=cols[f]||[],s=[],seen={};for(var k=0;k<v.length;k++){var a=v[k];if(a===null)continue;
 var key=typeof a+":"+a; if(!seen[key]){seen[key]=1;s.push(a);}}
 var nums=[],oth=[];for(var j=0;j<s.length;j++)(typeof s[j]==="number"?nums:oth).push(s[j]);
 nums.sort(function(p,q){return p-q;}); return nums.concat(oth);}
function isnum(v){return typeof v==="number"&&isFinite(v);}
function trim(s){return (s.indexOf(".")>=0&&s.indexOf("e")<0)?s.replace(/0+$/,"").replace(/\.$/,""):s;}
function fmt(v){if(v===null||v===undefined)return "\u2014"; if(typeof v!=="number")return String(v);
 var a=Math.abs(v); if(a>=1e9)return trim((v/1e9).toPrecision(3))+"G"; if(a>=1e6)return trim((v/1e6).toPrecision(3))+"M";
 if(a>=1e4)return trim((v/1e3).toPrecision(3))+"k"; if(a>=100||v===Math.round(v))return String(Math.round(v)); return trim(v.toPrecision(3));}
var ctl={}, i, k;
var sliders=root.querySelectorAll("input[type=range]");
var xs=distinct(C.x), ys=cols[C.y]||[];
var cvals={}; for(i=0;i<C.controls.length;i++) cvals[C.controls[i]]=distinct(C.controls[i]);
function current(f){var s=root.querySelector('input[data-control="'+f+'"]');return cvals[f][+s.value];}
function selectedX(){return xs[+root.querySelector("input[data-point]").value];}
var series=C.series?distinct(C.series):[null];
function tr(v,lg){return lg?(v>0?Math.log(v)/Math.LN10:null):v;}
function range(vals,lg){var lo=Infinity,hi=-Infinity;for(var j=0;j<vals.length;j++){var t=tr(vals[j],lg);
 if(t!==null&&isFinite(t)){if(t<lo)lo=t;if(t>hi)hi=t;}} if(lo===Infinity){lo=0;hi=1;} if(lo===hi){lo-=0.5;hi+=0.5;} return [lo,hi];}
var xnum=[]; for(i=0;i<xs.length;i++) if(isnum(xs[i])) xnum.push(xs[i]);
var categorical=xnum.length<xs.length;
var xr=categorical?[0,Math.max(xs.length-1,1)]:range(xnum,C.logX);
var yall=[]; for(i=0;i<ys.length;i++) if(isnum(ys[i])) yall.push(ys[i]);
for(i=0;i<C.hlines.length;i++) yall.push(C.hlines[i][1]);
if(!C.logY) yall.push(0);
var yr=range(yall,C.logY); if(!C.logY) yr[1]+= (yr[1]-yr[0])*0.05;
var W=720,H=C.height,L=64,R=W-130,T=14,B=H-40;
function px(v){var t=categorical?xs.indexOf(v):tr(v,C.logX);return L+(t-xr[0])/(xr[1]-xr[0])*(R-L);}
function py(v){var t=tr(v,C.logY);return B-(t-yr[0])/(yr[1]-yr[0])*(B-T);}
function el(name,attrs,text){var e=document.createElementNS(NS,name);for(var a in attrs)e.setAttribute(a,attrs[a]);
 if(text!==undefined)e.appendChild(document.createTextNode(text));return e;}
function ticks(r,lg,cat){var out=[],j;
 if(cat){var step=Math.ceil(xs.length/10);for(j=0;j<xs.length;j+=step)out.push(xs[j]);return out;}
 if(lg){var a=Math.floor(r[0]),b=Math.ceil(r[1]);var per=b-a>8?2:1;for(j=a;j<=b;j+=per){var v=Math.pow(10,j);if(j>=r[0]-1e-9&&j<=r[1]+1e-9)out.push(v);}
  if(out.length<2){out=[];var src=(r===xr?xnum:yall);var d=[];for(j=0;j<src.length;j++)if(src[j]>0&&d.indexOf(src[j])<0)d.push(src[j]);
   d.sort(function(p,q){return p-q;});var st=Math.ceil(d.length/8);for(j=0;j<d.length;j+=st)out.push(d[j]);}
  return out;}
 var span=r[1]-r[0],raw=span/6,mag=Math.pow(10,Math.floor(Math.log(raw)/Math.LN10)),n=raw/mag;
 var step2=(n<1.5?1:n<3?2:n<7?5:10)*mag;for(j=Math.ceil(r[0]/step2)*step2;j<=r[1]+1e-9*span;j+=step2)out.push(Math.abs(j)<1e-12*span?0:j);return out;}
function draw(){
 var svg=root.querySelector("svg.course-explorer-plot"); while(svg.firstChild)svg.removeChild(svg.firstChild);
 var j,t;
 svg.appendChild(el("rect",{x:L,y:T,width:R-L,height:B-T,fill:"#fff",stroke:"#999"}));
 var xt=ticks(xr,C.logX,categorical),yt=ticks(yr,C.logY,false);
 for(j=0;j<xt.length;j++){t=px(xt[j]);svg.appendChild(el("line",{x1:t,x2:t,y1:T,y2:B,stroke:"#eee"}));
  svg.appendChild(el("text",{x:t,y:B+14,"text-anchor":"middle","font-size":11,fill:"#444"},fmt(xt[j])));}
 for(j=0;j<yt.length;j++){t=py(yt[j]);svg.appendChild(el("line",{x1:L,x2:R,y1:t,y2:t,stroke:"#eee"}));
  svg.appendChild(el("text",{x:L-5,y:t+4,"text-anchor":"end","font-size":11,fill:"#444"},fmt(yt[j])));}
 svg.appendChild(el("text",{x:(L+R)/2,y:H-6,"text-anchor":"middle","font-size":12},C.xlabel+(C.logX?" (log)":"")));
 svg.appendChild(el("text",{x:14,y:(T+B)/2,"text-anchor":"middle","font-size":12,transform:"rotate(-90 14 "+((T+B)/2)+")"},C.ylabel+(C.logY?" (log)":"")));
 for(j=0;j<C.hlines.length;j++){var hv=C.hlines[j][1];if(C.logY&&hv<=0)continue;t=py(hv);
  svg.appendChild(el("line",{x1:L,x2:R,y1:t,y2:t,stroke:"#555","stroke-dasharray":"6 4","class":"course-explorer-hline"}));
  svg.appendChild(el("text",{x:R+4,y:t+4,"font-size":11,fill:"#333"},C.hlines[j][0]+" "+fmt(hv)));}
 var cur={};for(j=0;j<C.controls.length;j++)cur[C.controls[j]]=current(C.controls[j]);
 var keep=[]; for(k=0;k<D.n;k++){var ok=true;for(j=0;j<C.controls.length;j++){var f=C.controls[j];if(cols[f][k]!==cur[f]){ok=false;break;}}if(ok)keep.push(k);}
 var sx=selectedX(), picked=[], legend=root.querySelector(".course-explorer-legend"), lh=[], untimed=0;
 var X=cols[C.x];
 for(var s=0;s<series.length;s++){
  var rows=[];for(j=0;j<keep.length;j++){k=keep[j];if(!C.series||cols[C.series][k]===series[s])rows.push(k);}
  rows.sort(function(p,q){return categorical?xs.indexOf(X[p])-xs.indexOf(X[q]):X[p]-X[q];});
  var d="",pen=false,color=COLORS[s%COLORS.length];
  for(j=0;j<rows.length;j++){k=rows[j];var yv=ys[k];
   if(!isnum(yv)||(C.logY&&yv<=0)||(C.logX&&!categorical&&!(X[k]>0))){pen=false;continue;}
   d+=(pen?"L":"M")+px(X[k]).toFixed(1)+" "+py(yv).toFixed(1);pen=true;}
  if(d) svg.appendChild(el("path",{d:d,fill:"none",stroke:color,"stroke-width":2,"class":"course-explorer-line","data-series":String(series[s])}));
  for(j=0;j<rows.length;j++){k=rows[j];yv=ys[k];if(!isnum(yv)||(C.logY&&yv<=0))continue;var sel=X[k]===sx;
   svg.appendChild(el("circle",{cx:px(X[k]).toFixed(1),cy:py(yv).toFixed(1),r:sel?5.5:2.5,fill:sel?"#fff":color,stroke:color,"stroke-width":sel?2.5:1,"class":sel?"course-explorer-selected":"course-explorer-point"}));}
  for(j=0;j<rows.length;j++){k=rows[j];if(isnum(ys[k])||!(cols.note&&cols.note[k]))continue;
   if(!categorical&&!(isnum(X[k])&&(!C.logX||X[k]>0)))continue;
   var mx=px(X[k]),my=B-7,mark=el("g",{"class":"course-explorer-untimed","data-series":String(series[s])});
   mark.appendChild(el("title",{},C.x+" = "+fmt(X[k])+": "+cols.note[k]));
   mark.appendChild(el("path",{d:"M"+(mx-4)+" "+(my-4)+"L"+(mx+4)+" "+(my+4)+"M"+(mx-4)+" "+(my+4)+"L"+(mx+4)+" "+(my-4),stroke:color,"stroke-width":2}));
   svg.appendChild(mark);untimed++;}
  for(j=0;j<rows.length;j++)if(X[rows[j]]===sx)picked.push([s,rows[j]]);
  if(C.series)lh.push('<span style="margin-right:12px"><span style="display:inline-block;width:14px;height:3px;background:'+color+';vertical-align:middle;margin-right:4px"></span>'+esc(C.series+" = "+fmt(series[s]))+"</span>");
 }
 if(sx!==undefined&&(categorical||isnum(sx))){t=px(sx);svg.insertBefore(el("line",{x1:t,x2:t,y1:T,y2:B,stroke:"#bbb","stroke-dasharray":"2 3"}),svg.childNodes[1]);}
 if(untimed)lh.push('<span style="margin-right:12px">\u00d7 not timed (invalid or spills; hover for why)</span>');
 legend.innerHTML=lh.join("");
 var lines=[];
 for(j=0;j<picked.length;j++){k=picked[j][1];var parts=[];
  if(C.series)parts.push(C.series+" = "+fmt(cols[C.series][k]));
  parts.push(C.x+" = "+fmt(X[k]));
  if(isnum(ys[k])){parts.push(C.y+" = "+fmt(ys[k]));for(var q=0;q<C.readout.length;q++){var rf=C.readout[q];if(rf!==C.y&&rf!==C.x)parts.push(rf+" = "+fmt(cols[rf][k]));}}
  else parts.push(C.y+": no value ("+((cols.note&&cols.note[k])||"not measured")+")");
  lines.push(esc(parts.join(", ")));}
 if(!lines.length)lines.push(esc(C.x+" = "+fmt(sx)+": nothing recorded for these settings"));
 root.querySelector(".course-explorer-readout").innerHTML=lines.join("<br>");
 for(j=0;j<sliders.length;j++){var sl=sliders[j],f2=sl.getAttribute("data-control")||sl.getAttribute("data-point");
  var o=root.querySelector('output[data-for="'+f2+'"]');if(o)o.textContent=fmt(sl.getAttribute("data-point")?selectedX():current(f2));}
}
function esc(s){return String(s).replace(/&/g,"&amp;").replace(/</g,"&lt;").replace(/>/g,"&gt;");}
for(i=0;i<sliders.length;i++){sliders[i].addEventListener("input",draw);sliders[i].addEventListener("change",draw);}
root.querySelector("svg.course-explorer-plot").addEventListener("click",function(ev){
 var svg=ev.currentTarget,box=svg.getBoundingClientRect();if(!box.width)return;
 var vx=(ev.clientX-box.left)*W/box.width,best=0,bd=Infinity;
 for(var j=0;j<xs.length;j++){var dd=Math.abs(px(xs[j])-vx);if(dd<bd){bd=dd;best=j;}}
 root.querySelector("input[data-point]").value=best;draw();});
draw();
})();
"""
