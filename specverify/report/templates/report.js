// Copy buttons: copy the text of the element named by data-copy.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button) { return; }
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source) { return; }
  var label = button.textContent;
  function finish(copied) {
    button.textContent = copied ? "Copied" : "Selected: press Ctrl+C";
    setTimeout(function () { button.textContent = label; }, 1600);
  }
  function selectIt() {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var copied = false;
    try { copied = document.execCommand("copy"); } catch (error) { copied = false; }
    finish(copied);
  }
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(source.textContent).then(function () { finish(true); }, selectIt);
  } else {
    selectIt();
  }
});
