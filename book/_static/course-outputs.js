/* Outputs that fit the content column (see course-outputs.css).
 *
 * 1. A printed output whose lines are prose (no aligned columns, no source code) wraps; one whose
 *    lines line up in columns (a table printed with padding) or that is source code keeps its lines
 *    and scrolls inside its box, because wrapping would scramble the columns.
 * 2. Every box that scrolls sideways gets the class `course-scrolls` (its shadow hint) and can be
 *    scrolled from the keyboard; the class follows the box as the window is resized.
 */
(function () {
  "use strict";

  var CODE_LINE = /^\s*(\/\/|\/\*|\*|#include|#define|#pragma|template\s*<|extern\s+"C"|__global__|__device__|[{}]\s*$)/;
  var COLUMNS = /\S {2,}\S/;          // two or more spaces between words: padding that aligns columns
  var BOX_DRAWING = /[\u2500-\u257f|]/;

  /** True when the text keeps its meaning only with its line breaks and alignment intact. */
  function isAligned(text) {
    var lines = text.split("\n"), aligned = 0, j;
    for (j = 0; j < lines.length; j++) {
      if (CODE_LINE.test(lines[j]) || BOX_DRAWING.test(lines[j])) return true;
      if (COLUMNS.test(lines[j].trim())) aligned++;
    }
    return aligned >= 2 || (aligned >= 1 && lines.filter(function (l) { return l.trim(); }).length <= 2);
  }

  function classifyOutputs(root) {
    var pres = root.querySelectorAll(".cell_output pre");
    for (var j = 0; j < pres.length; j++) {
      if (!isAligned(pres[j].textContent)) pres[j].classList.add("course-wrap");
    }
  }

  var SCROLLERS = ".bd-article pre, .bd-article .cell_output .output.text_html, .bd-article .pst-scrollable-table-container";

  function markScrollers(boxes) {
    // measure every box first, then change classes: interleaving the two would make the browser
    // lay out the page again for every box
    var scrolling = [], j;
    for (j = 0; j < boxes.length; j++) scrolling.push(boxes[j].scrollWidth > boxes[j].clientWidth + 1);
    for (j = 0; j < boxes.length; j++) {
      var box = boxes[j], scrolls = scrolling[j];
      box.classList.toggle("course-scrolls", scrolls);
      if (scrolls) {
        box.setAttribute("tabindex", "0");
        if (!box.title) box.title = "wider than the page: scroll sideways inside this box";
      }
    }
  }

  function start() {
    classifyOutputs(document);
    var boxes = document.querySelectorAll(SCROLLERS);
    // A box changes width with the window, and gets one when the dropdown holding it opens. A
    // ResizeObserver reports each box once at the start and again whenever its size changes, right
    // after the browser has laid the page out (so measuring it then costs nothing extra).
    if (window.ResizeObserver) {
      var observer = new ResizeObserver(function (entries) {
        markScrollers(entries.map(function (entry) { return entry.target; }));
      });
      for (var j = 0; j < boxes.length; j++) observer.observe(boxes[j]);
      // A web font that arrives late widens a box's text but not the box: measure again then.
      var again = function () { markScrollers(document.querySelectorAll(SCROLLERS)); };
      if (document.fonts && document.fonts.ready) document.fonts.ready.then(again);
      window.addEventListener("load", again);
    } else {
      var all = function () { markScrollers(document.querySelectorAll(SCROLLERS)); };
      all();
      window.addEventListener("resize", all);
      document.addEventListener("click", function () { setTimeout(all, 0); });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
