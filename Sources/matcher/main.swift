print("matcher")
