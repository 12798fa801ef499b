-- wrk request: a streamed chat completion of 32 tokens.
wrk.method = "POST"
wrk.body = '{"model":"sim-model","stream":true,"max_tokens":32,"messages":[{"role":"user","content":"Stream me a story."}]}'
wrk.headers["Content-Type"] = "application/json"
