#include "scheduler/timeline_html.h"

#include <algorithm>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "framework/file_util.h"
#include "scheduler/timeline_metrics.h"

namespace loom {
namespace {

using nlohmann::json;

// Box classes; the page's palette is indexed by them.
enum BoxClass {
  kForward, kBackward, kBackwardB, kBackwardW, kOptimizer,
  kCommMp, kCommDp, kCommP2p, kCommSharding, kNoOp,
};

int ClassOf(const TraceEvent& e) {
  if (e.kind == InstructionKind::kNoOp) return kNoOp;
  if (e.comm != CommCategory::kNone) return kCommMp + static_cast<int>(e.comm);
  switch (e.job.type) {
    case JobType::kForward: return kForward;
    case JobType::kBackward: return kBackward;
    case JobType::kBackwardB: return kBackwardB;
    case JobType::kBackwardW: return kBackwardW;
    case JobType::kOptimizer: return kOptimizer;
  }
  return kForward;
}

json PanelJson(const TimelinePanel& panel) {
  int64_t epoch = std::numeric_limits<int64_t>::max();
  for (const TraceEvent& e : panel.events) epoch = std::min(epoch, e.start_ns);
  if (panel.events.empty()) epoch = 0;
  auto us = [&](int64_t ns) { return static_cast<double>(ns - epoch) / 1000.0; };

  // Rows: by rank, then stream lane order.
  std::map<std::pair<int, std::pair<int, std::string>>, std::vector<const TraceEvent*>> rows;
  std::map<std::string, int> names;  // op type -> index into "names"
  bool chunks = false;
  for (const TraceEvent& e : panel.events) chunks |= e.job.chunk > 0;
  json name_list = json::array();
  for (const TraceEvent& e : panel.events) {
    rows[{e.rank, {StreamOrder(e.stream), e.stream}}].push_back(&e);
    if (names.emplace(e.op, static_cast<int>(names.size())).second) name_list.push_back(e.op);
  }
  json out;
  out["title"] = panel.title;
  out["summary"] = panel.summary;
  out["names"] = std::move(name_list);
  json& row_list = out["rows"] = json::array();
  for (auto& [key, events] : rows) {
    std::sort(events.begin(), events.end(), [](const TraceEvent* a, const TraceEvent* b) {
      return a->start_ns < b->start_ns;
    });
    // Each box: [start_us, end_us, class, micro-batch, chunk, name index, job].
    json boxes = json::array();
    for (const TraceEvent* e : events) {
      boxes.push_back({us(e->start_ns), us(e->end_ns), ClassOf(*e), e->job.micro_batch,
                       e->job.chunk, names[e->op], JobToString(e->job, chunks)});
    }
    row_list.push_back({{"rank", key.first}, {"stream", key.second.second}, {"boxes", boxes}});
  }
  // Marks: calc bubbles and exposed communication, per rank.
  TimelineMetrics m = AnalyzeTrace(panel.events, /*intervals=*/true);
  json& marks = out["marks"] = json::array();
  for (const RankTimelineMetrics& r : m.ranks) {
    json idle = json::array();
    for (const TimeInterval& i : r.calc_idle) idle.push_back({i.start * 1e6, i.end * 1e6});
    json exposed = json::array();
    for (int c = 0; c < kNumCommCategories; ++c) {
      for (const TimeInterval& i : r.exposed[c]) {
        exposed.push_back({i.start * 1e6, i.end * 1e6, kCommMp + c});
      }
    }
    marks.push_back({{"rank", r.rank},
                     {"idle", idle},
                     {"exposed", exposed},
                     {"bubble", r.bubble_fraction},
                     {"exposed_s", r.exposed_comm_s}});
  }
  out["end_us"] = m.step_time_s * 1e6;
  return out;
}

// The page: styles, a legend, one canvas per panel, and the drawing code.
constexpr const char* kPageHead = R"HTML(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%TITLE%</title>
<style>
body{font:13px system-ui,sans-serif;margin:12px;color:#222;background:#fff}
h1{font-size:17px;margin:0 0 6px}
h2{font-size:14px;margin:14px 0 2px}
.summary{color:#555;margin:0 0 4px}
.legend span{display:inline-block;margin-right:12px}
.legend i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
.help{color:#777;margin:4px 0 8px}
canvas{display:block;border:1px solid #ddd;cursor:crosshair}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:4px 6px;
 border-radius:3px;font:12px monospace;white-space:pre;display:none;z-index:2}
</style></head>
<body>
<script>
window.__errors=[];
window.addEventListener('error',function(e){window.__errors.push(String(e.message));
 document.body.setAttribute('data-errors',window.__errors.join(' | '));});
</script>
<h1>%TITLE%</h1>
<div class="legend" id="legend"></div>
<div class="help">wheel: zoom &middot; drag: pan &middot; double click: reset &middot; hover a box for its op and times &middot; grey hatching: calc-stream bubble &middot; the strip under each rank: exposed communication</div>
<div id="panels"></div>
<div id="tip"></div>
<script id="data" type="application/json">)HTML";

constexpr const char* kPageTail = R"HTML(</script>
<script>
(function(){
const DATA=JSON.parse(document.getElementById('data').textContent);
const CLASSES=[['forward','#4e79a7'],['backward','#f28e2b'],['backward (B half)','#e15759'],
 ['weight-grad (W)','#59a14f'],['optimizer','#b07aa1'],['mp comm','#d62728'],
 ['dp comm','#17becf'],['p2p comm','#7f7f7f'],['sharding comm','#8c564b'],['no-op','#dddddd']];
const legend=document.getElementById('legend');
CLASSES.forEach(function(c){const s=document.createElement('span');
 s.innerHTML='<i style="background:'+c[1]+'"></i>'+c[0];legend.appendChild(s);});
const ROW=18, EXPOSED=7, GAP=6, LABEL=118, AXIS=18;
let end=0; DATA.panels.forEach(function(p){end=Math.max(end,p.end_us||0);});
if(!(end>0)) end=1;
const view={t0:0,t1:end*1.02};
const panels=[]; let painted=0, rowsDrawn=0;
const tip=document.getElementById('tip');
function fmt(us){return us>=1000?(us/1000).toFixed(3)+' ms':us.toFixed(1)+' us';}
DATA.panels.forEach(function(p){
 const h2=document.createElement('h2');h2.textContent=p.title;
 const sm=document.createElement('div');sm.className='summary';sm.textContent=p.summary||'';
 const cv=document.createElement('canvas');
 const host=document.getElementById('panels');host.appendChild(h2);host.appendChild(sm);host.appendChild(cv);
 const layout=[]; let y=AXIS; let lastRank=null;
 const marks={}; (p.marks||[]).forEach(function(m){marks[m.rank]=m;});
 p.rows.forEach(function(r,i){
  if(lastRank!==null && r.rank!==lastRank){layout.push({exposed:lastRank,y:y+2});y+=EXPOSED+GAP+2;}
  layout.push({row:r,y:y});y+=ROW;lastRank=r.rank;});
 if(lastRank!==null){layout.push({exposed:lastRank,y:y});y+=EXPOSED+GAP;}
 panels.push({p:p,cv:cv,layout:layout,height:y,marks:marks});
});
function draw(){
 painted=0;rowsDrawn=0;
 const width=Math.max(600,document.body.clientWidth-30);
 const dpr=window.devicePixelRatio||1;
 panels.forEach(function(P){
  const cv=P.cv;cv.width=width*dpr;cv.height=P.height*dpr;
  cv.style.width=width+'px';cv.style.height=P.height+'px';
  const g=cv.getContext('2d');g.setTransform(dpr,0,0,dpr,0,0);
  g.fillStyle='#fff';g.fillRect(0,0,width,P.height);
  const W=width-LABEL-4, sx=W/(view.t1-view.t0);
  const X=function(t){return LABEL+(t-view.t0)*sx;};
  g.font='11px monospace';g.fillStyle='#555';g.strokeStyle='#eee';
  for(let k=0;k<=8;k++){const t=view.t0+(view.t1-view.t0)*k/8;const x=X(t);
   g.beginPath();g.moveTo(x,AXIS-4);g.lineTo(x,P.height);g.stroke();
   if(x+g.measureText(fmt(t)).width+2<width)g.fillText(fmt(t),x+2,11);}
  P.layout.forEach(function(L){
   if(L.exposed!==undefined){
    g.fillStyle='#555';g.fillText('exposed',4,L.y+EXPOSED);
    const m=P.marks[L.exposed];if(!m)return;
    m.exposed.forEach(function(e){const a=X(e[0]),b=X(e[1]);if(b<LABEL||a>width)return;
     g.fillStyle=CLASSES[e[2]][1];g.fillRect(Math.max(a,LABEL),L.y,Math.max(1,b-Math.max(a,LABEL)),EXPOSED);});
    return;}
   const r=L.row;rowsDrawn++;
   g.fillStyle='#333';g.fillText('r'+r.rank+' '+r.stream,4,L.y+13);
   if(r.stream==='calc'&&P.marks[r.rank]){
    g.fillStyle='rgba(0,0,0,0.07)';
    P.marks[r.rank].idle.forEach(function(e){const a=Math.max(X(e[0]),LABEL),b=X(e[1]);
     if(b>a)g.fillRect(a,L.y+1,b-a,ROW-2);});}
   r.boxes.forEach(function(b){let a=X(b[0]),z=X(b[1]);if(z<LABEL||a>width)return;
    a=Math.max(a,LABEL);const w=Math.max(1,z-a);
    g.fillStyle=CLASSES[b[2]][1];g.fillRect(a,L.y+2,w,ROW-4);painted+=w;});
   // On calc rows, the job (micro-batch, chunk) over each run of its boxes,
   // where it fits.
   let i=r.stream==='calc'?0:r.boxes.length;g.fillStyle='#fff';
   while(i<r.boxes.length){let j=i;while(j+1<r.boxes.length&&r.boxes[j+1][6]===r.boxes[i][6])j++;
    const a=Math.max(X(r.boxes[i][0]),LABEL),z=Math.min(X(r.boxes[j][1]),width);
    const txt=r.boxes[i][6];
    if(z-a>g.measureText(txt).width+4)g.fillText(txt,(a+z)/2-g.measureText(txt).width/2,L.y+13);
    i=j+1;}
  });
 });
 document.body.setAttribute('data-rendered','ok');
 document.body.setAttribute('data-rows',String(rowsDrawn));
 document.body.setAttribute('data-painted',String(Math.round(painted)));
}
function hit(P,x,y){
 const width=P.cv.clientWidth,W=width-LABEL-4,t=view.t0+(x-LABEL)/(W/(view.t1-view.t0));
 for(const L of P.layout){if(!L.row||y<L.y||y>=L.y+ROW)continue;
  for(const b of L.row.boxes){if(t>=b[0]&&t<=b[1])return {r:L.row,b:b};}
  const tol=3*(view.t1-view.t0)/W;
  for(const b of L.row.boxes){if(t>=b[0]-tol&&t<=b[1]+tol)return {r:L.row,b:b};}}
 return null;}
panels.forEach(function(P){
 const cv=P.cv;let drag=null;
 cv.addEventListener('wheel',function(ev){ev.preventDefault();
  const rect=cv.getBoundingClientRect(),W=rect.width-LABEL-4;
  const t=view.t0+(ev.clientX-rect.left-LABEL)*(view.t1-view.t0)/W;
  const f=ev.deltaY<0?0.8:1.25;view.t0=t-(t-view.t0)*f;view.t1=t+(view.t1-t)*f;draw();},{passive:false});
 cv.addEventListener('mousedown',function(ev){drag={x:ev.clientX,t0:view.t0,t1:view.t1};});
 window.addEventListener('mouseup',function(){drag=null;});
 cv.addEventListener('mousemove',function(ev){const rect=cv.getBoundingClientRect();
  if(drag){const W=rect.width-LABEL-4,dt=(ev.clientX-drag.x)*(drag.t1-drag.t0)/W;
   view.t0=drag.t0-dt;view.t1=drag.t1-dt;draw();return;}
  const h=hit(P,ev.clientX-rect.left,ev.clientY-rect.top);
  if(!h){tip.style.display='none';return;}
  const b=h.b;tip.textContent=P.p.names[b[5]]+'\n'+b[6]+' on rank '+h.r.rank+', stream '+h.r.stream+
   '\nstart '+fmt(b[0])+', duration '+fmt(b[1]-b[0]);
  tip.style.display='block';tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';});
 cv.addEventListener('mouseleave',function(){tip.style.display='none';});
 cv.addEventListener('dblclick',function(){view.t0=0;view.t1=end*1.02;draw();});
});
window.addEventListener('resize',draw);
draw();
})();
</script>
</body></html>
)HTML";

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

std::string EscapeHtml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string TimelineHtml(const std::string& title, const std::vector<TimelinePanel>& panels) {
  json data;
  data["panels"] = json::array();
  for (const TimelinePanel& p : panels) data["panels"].push_back(PanelJson(p));
  // "</" inside a script element would end it early.
  const std::string payload = ReplaceAll(data.dump(), "</", "<\\/");
  return ReplaceAll(kPageHead, "%TITLE%", EscapeHtml(title)) + payload + kPageTail;
}

Status WriteTimelineHtml(const std::string& path, const std::string& title,
                         const std::vector<TimelinePanel>& panels) {
  return WriteFileAtomically(path, TimelineHtml(title, panels));
}

}  // namespace loom
