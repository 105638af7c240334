// The recovery codes page (templates/recovery_codes.html): a button that
// copies the codes, one a line. Without script, or without the Clipboard API
// (it needs a secure context), the button stays hidden and the download link
// does the same job.
'use strict';
(() => {
  const button = document.getElementById('codes-copy');
  const status = document.getElementById('codes-status');
  if (!button || !status || !navigator.clipboard) return;
  button.hidden = false;
  button.addEventListener('click', async () => {
    const codes = Array.from(document.querySelectorAll('#recovery-codes code'), (c) => c.textContent);
    try {
      await navigator.clipboard.writeText(`${codes.join('\n')}\n`);
      status.textContent = button.dataset.copied;
    } catch {
      status.textContent = button.dataset.failed;
    }
  });
})();
