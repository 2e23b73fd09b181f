"""Files attached to a message (issue 27), the first part: what a file is, judged from its bytes,
a name fit to show, and its text, extracted in a process of its own within a time and memory
limit.

- kinds: the kind of a file from its content (PDF, DOCX, UTF-8 text, an image), never its name;
- names: a file's name as shown and put in a prompt (files are stored under keys of their own);
- extraction: a file's text, read by `worker` in a child process with limits, off the event loop.
"""
