-- wrk request: a small non-streaming chat completion (the proxy benchmark's unit of work).
wrk.method = "POST"
wrk.body = '{"model":"test-model","max_tokens":4,"messages":[{"role":"user","content":"Say hello to the benchmark"}]}'
wrk.headers["Content-Type"] = "application/json"
