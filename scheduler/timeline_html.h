// One self-contained HTML page that draws timelines: one panel per trace
// (simulated, measured, or two schedules), one row per rank and stream,
// boxes coloured by what they do (forward, backward, weight-grad,
// optimizer, and each kind of communication) and labelled with their
// micro-batch; calc-stream bubbles shaded, exposed communication marked
// under each rank. Hovering a box shows its op, job and times; the wheel
// zooms, dragging pans, a double click resets, and all panels share one
// time axis so that they line up.
//
// The page needs no network: its script and data are inline. When it has
// drawn, it sets data-rendered="ok" on <body> with the number of rows and
// painted pixels, and any script error lands in data-errors, so a headless
// browser's DOM dump can check it.
#ifndef LOOM_SCHEDULER_TIMELINE_HTML_H_
#define LOOM_SCHEDULER_TIMELINE_HTML_H_

#include <string>
#include <vector>

#include "scheduler/trace.h"

namespace loom {

struct TimelinePanel {
  std::string title;    // "simulated on local", "measured"
  std::string summary;  // a line of figures under the title; may be empty
  std::vector<TraceEvent> events;
};

std::string TimelineHtml(const std::string& title, const std::vector<TimelinePanel>& panels);
// Written atomically.
Status WriteTimelineHtml(const std::string& path, const std::string& title,
                         const std::vector<TimelinePanel>& panels);

}  // namespace loom

#endif  // LOOM_SCHEDULER_TIMELINE_HTML_H_
