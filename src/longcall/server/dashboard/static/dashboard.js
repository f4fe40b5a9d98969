// The dashboard's buttons. The server renders every page and every live update (htmx swaps
// them in); this file only acts: a form calls the JSON API as the curl command beside it
// does, with the login cookie and the page's CSRF token, after asking first where the step
// cannot be taken back, and says what came of it. It puts text into the page (textContent),
// never markup. htmx cannot do this: the API takes typed JSON bodies, not form fields.
'use strict';

// The login's CSRF token, which the server wrote into the page: a change the login cookie
// authenticates is refused without it, so no other page (not even one on this host at
// another port, which gets the cookie too) can make one.
const csrfToken = document.querySelector('meta[name="csrf-token"]')?.content ?? '';

function say(message, isError = false) {
  const box = document.getElementById('outcome');
  box.textContent = message;
  box.className = isError ? 'outcome error' : 'outcome';
}

// A refusal names the field at fault (each one's, when it lists several problems, as a
// run's answers do), unless its message already does.
const withField = (e) => (e.field && !e.message.includes(e.field) ? `${e.field}: ${e.message}` : e.message);
function problem(data, response) {
  const error = data?.error;
  if (error?.errors?.length) return error.errors.map(withField).join('; ');
  return error?.message ? withField(error) : `${response.status} ${response.statusText}`;
}

async function api(method, path, body) {
  const headers = { 'content-type': 'application/json', 'x-csrf-token': csrfToken };
  const options = { method, credentials: 'same-origin', headers };
  if (body !== undefined) options.body = JSON.stringify(body);
  const response = await fetch(path, options);
  if (response.status === 401) {
    location.assign('/login');
    throw new Error('The login has expired or the token was revoked.');
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new Error(problem(data, response));
  return data;
}

// The page's dialog (in the layout) asks a form's data-confirm question, with what follows
// and the words of the button that goes ahead; "Go back", focused first, and Escape say no.
// `sent` shows what is about to be sent, when there is something to read.
function confirmed(form, sent = '') {
  if (!form.dataset.confirm) return Promise.resolve(true);
  const dialog = document.getElementById('confirm');
  dialog.querySelector('h2').textContent = form.dataset.confirm;
  dialog.querySelector('.detail').textContent = form.dataset.confirmDetail ?? '';
  const shownSent = dialog.querySelector('.sent');
  shownSent.textContent = sent;
  shownSent.hidden = !sent;
  const yes = dialog.querySelector('.yes');
  const no = dialog.querySelector('.no');
  yes.textContent = form.dataset.confirmYes;
  yes.className = `yes ${form.classList.contains('decision') ? 'decision' : 'danger'}`;
  return new Promise((resolve) => {
    const answer = (ok) => {
      dialog.close();
      resolve(ok);
    };
    yes.onclick = () => answer(true);
    no.onclick = () => answer(false);
    dialog.oncancel = (event) => {
      event.preventDefault();
      answer(false);
    };
    dialog.showModal();
    no.focus();
  });
}

// A job action's body from its inputs: a box is true or false, JSON is parsed, an empty
// text is left out.
function fieldsOf(form) {
  const body = {};
  for (const input of form.querySelectorAll('[data-kind]')) {
    if (input.dataset.kind === 'bool') {
      body[input.name] = input.checked;
    } else if (input.dataset.kind === 'json') {
      try {
        body[input.name] = JSON.parse(input.value);
      } catch {
        throw new Error(`The ${input.name} is not valid JSON.`);
      }
    } else if (input.value.trim()) {
      body[input.name] = input.value.trim();
    }
  }
  return body;
}

// A run's answers from the inputs the server built from each question's schema. A yes or
// no, or a choice, left unset is left out, or refused if the question needs it: nothing is
// decided for the person answering.
function answersOf(form) {
  const body = {};
  for (const input of form.querySelectorAll('[data-kind]')) {
    const { key, prop, kind, label } = input.dataset;
    const required = 'required' in input.dataset;
    let value;
    if (kind === 'boolean') {
      const picked = input.querySelector('input:checked');
      if (!picked) {
        if (required) throw new Error(`${key}: choose yes or no for “${label}”.`);
        continue;
      }
      value = picked.value === 'true';
    } else if (kind === 'enum') {
      if (input.value === '') {
        if (required) throw new Error(`${key}: choose one for “${label}”.`);
        continue;
      }
      value = JSON.parse(input.value);
    } else if (kind === 'number' || kind === 'integer') {
      if (input.value.trim() === '') continue;
      value = Number(input.value);
    } else if (kind === 'json') {
      try {
        value = JSON.parse(input.value);
      } catch {
        throw new Error(`The answer to ${key} is not valid JSON.`);
      }
    } else {
      if (input.value === '' && prop && !required) continue;
      value = input.value;
    }
    if (prop) {
      body[key] = body[key] ?? {};
      body[key][prop] = value;
    } else {
      body[key] = value;
    }
  }
  // An object whose properties are all optional and left empty is still an answer.
  for (const fieldset of form.querySelectorAll('fieldset.question')) {
    const single = fieldset.querySelector('[data-kind][data-prop=""]');
    if (!single && !(fieldset.dataset.key in body)) body[fieldset.dataset.key] = {};
  }
  return body;
}

// What a form sends: the answers, a job action's inputs, a fixed body, or nothing.
function bodyOf(form) {
  if (form.id === 'answers') return answersOf(form);
  if (form.dataset.verb) return fieldsOf(form);
  if (form.dataset.body) return JSON.parse(form.dataset.body);
  return undefined;
}

// The same command as curl() in _render.py, for a body the person has changed.
const shell = (text) => `'${text.replaceAll("'", "'\\''")}'`;
function curl(method, url, body) {
  const lines = [`curl -X ${method} ${shell(url)}`, '  -H "Authorization: Bearer $LONGCALL_TOKEN"'];
  if (body !== undefined) {
    lines.push("  -H 'Content-Type: application/json'", `  -d ${shell(JSON.stringify(body))}`);
  }
  return lines.join(' \\\n');
}

const when = (value) => (value ? String(value).slice(0, 19).replace('T', ' ') : '—');
// What came of each kind of action, from the API's answer.
const outcomes = {
  job: (a) => (a.changed ? `Done; the job is ${a.job.state}.` : `Nothing changed; the job is ${a.job.state}.`),
  redeliver: (a) => `Done; its delivery is ${a.job.delivery}.`,
  answers: (a) => `Answered; the run is ${a.status}.`,
  messages: (a) =>
    a.created
      ? `Sent: message ${a.seq} on “${a.topic}”, kept until the run receives it.`
      : `Not sent again: message ${a.seq} on “${a.topic}” had this key.`,
  cancel: (a) => {
    const stops = a.cancelRequested && !['completed', 'failed', 'cancelled'].includes(a.status);
    return `The run is ${a.status}${stops ? '; it stops at its next task call' : ''}.`;
  },
  pause: () => 'Paused: nothing fires until it is unpaused.',
  unpause: (a) => `Unpaused; the next fire is at ${when(a.nextFireAt)} UTC.`,
  trigger: (a) => (a.runId ? `Started run ${a.runId}.` : 'Skipped: a run of this schedule is still active.'),
};

document.addEventListener('submit', async (event) => {
  const form = event.target.closest('form[data-path]');
  if (!form) return;
  event.preventDefault();
  const button = form.querySelector('button');
  button.disabled = true;
  try {
    const body = bodyOf(form);
    const sent = form.id === 'answers' ? JSON.stringify(body, null, 2) : '';
    if (!(await confirmed(form, sent))) {
      say(form.dataset.declined);
      return;
    }
    const answer = await api(form.dataset.method, form.dataset.path, body);
    const kind = form.dataset.outcome;
    if (kind === 'delete') location.assign('/schedules');
    else if (kind === 'fork') location.assign(`/runs/${encodeURIComponent(answer.runId)}`);
    else say((outcomes[kind] ?? outcomes.job)(answer));
  } catch (error) {
    say(error.message, true);
  } finally {
    button.disabled = false;
  }
});

// The curl command beside a form follows what is typed into it.
function refreshCurl(event) {
  const form = event.target.closest('form[data-path]');
  const code = form?.querySelector('.curl code');
  if (!code) return;
  try {
    code.textContent = curl(form.dataset.method, location.origin + form.dataset.path, bodyOf(form));
  } catch (error) {
    code.textContent = `# ${error.message}`;
  }
}
document.addEventListener('input', refreshCurl);
document.addEventListener('change', refreshCurl);

// The live stream dropped: htmx reconnects it, and the stream's first update says "live".
document.addEventListener('htmx:sseError', () => {
  const live = document.getElementById('live');
  if (live) {
    live.textContent = 'reconnecting…';
    live.className = 'live';
  }
});
