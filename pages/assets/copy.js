// Progressive enhancement: a copy button beside every value marked `data-copy`. Without
// JavaScript (or without the Clipboard API) the values are plain, selectable text.
"use strict";
(function () {
  if (!navigator.clipboard) {
    return;
  }
  for (const value of document.querySelectorAll("[data-copy]")) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.textContent = "Copy";
    button.setAttribute("aria-label", "Copy " + (value.dataset.copy || "value"));
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(value.textContent).then(
        function () { button.textContent = "Copied"; },
        function () { button.textContent = "Copy failed"; }
      );
    });
    value.after(button);
  }
})();
