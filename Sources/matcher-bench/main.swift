print("matcher-bench")
